"""How a log line wraps Kafka's message: log4j layouts, and what tools put in front of them.

A layout is a log4j ConversionPattern compiled into a regular expression with the groups `ts`, `level`,
`msg` and, when the pattern has them, `logger` and `thread`. Known layouts are tried on each file and the
one matching most lines is used for the whole file; `--log-pattern` replaces them with the user's own.

- Kafka's default, `[%d] %p %m (%c)%n` (config/log4j.properties, every release from 0.8.2 to 3.9);
- Strimzi's, `%d{ISO8601} %p %m (%c) [%t]%n` (strimzi/strimzi-kafka-operator,
  cluster-operator/src/main/resources/default-logging/KafkaCluster.properties of its log4j 1 releases).

Before the layout a line may carry a docker compose service prefix (`kafka_1  | `) or a `grep -R`/`grep -n`
file prefix (`broker-1/state-change.log:` and `...log:12:`); both are stripped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final


class PatternError(ValueError):
    """A ConversionPattern kcm cannot read; the message names the conversion."""


@dataclass(frozen=True)
class Layout:
    name: str
    pattern: str
    regex: re.Pattern[str]
    head: re.Pattern[str]  # what comes before the message: a line starting so is no wrapped continuation
    tail_free: bool  # nothing follows the message, so a message may go on on the next line

    def match(self, text: str) -> re.Match[str] | None:
        """The line read by the layout, at its start or, for a layout that begins with the date, after
        whatever a tool printed before it (a test harness's own log line, `docker logs -t` times...)."""
        found = self.regex.match(text)
        if found is not None or "(?P<ts>" not in self.head.pattern:
            return found
        for start in re.finditer(self.head.pattern[1:], text):
            found = self.regex.match(text[start.start():])  # "^" holds at a slice's start, not at a pos
            if found is not None:
                return found
        return None


# A log4j date in any of its common formats: %d (ISO8601 with a space), %d{ISO8601} in log4j 1 (space) and 2
# ("T"), %d{yyyy-MM-dd HH:mm:ss} without milliseconds, with an optional zone.
_DATE: Final = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
# Conversion character -> (regular expression, named group or None). Letters log4j knows but whose value
# is free text (class, file, method, MDC...) match lazily and are not kept.
_CONVERSIONS: Final[dict[str, tuple[str, str | None]]] = {
    "d": (_DATE, "ts"), "p": (r"[A-Z]+", "level"), "m": (r".*?", "msg"), "c": (r"\S+?", "logger"),
    "t": (r".*?", "thread"), "C": (r"\S+?", None), "F": (r"\S+?", None), "L": (r"\d+|\?", None),
    "M": (r"\S+?", None), "l": (r".*?", None), "r": (r"\d+", None), "x": (r".*?", None), "X": (r".*?", None),
    "h": (r"\S+?", None), "i": (r"\S+?", None),
}
# Named date formats of log4j; any other %d{...} is a SimpleDateFormat pattern, translated by _date.
_NAMED_DATES: Final = {"ISO8601": _DATE, "DEFAULT": _DATE, "ISO8601_BASIC": r"\d{8}T?\d{6}(?:[,.]\d+)?",
                       "ABSOLUTE": r"\d\d:\d\d:\d\d(?:[,.]\d+)?", "DATE": r"\d\d \w+ \d{4} \d\d:\d\d:\d\d(?:[,.]\d+)?",
                       "UNIX": r"\d+", "UNIX_MILLIS": r"\d+"}
_SPEC: Final = re.compile(r"%(?P<mod>-?\d*(?:\.\d+)?)(?P<conv>[a-zA-Z%])(?P<opt>\{[^}]*\})?")


def compile_pattern(pattern: str, name: str = "--log-pattern") -> Layout:
    """A log4j ConversionPattern (`[%d] %p %m (%c)%n`, `%d{ISO8601} %-5p [%t] %c{1}: %m%n`...) as a Layout.
    A padded conversion (`%-5p`) may be followed by the spaces padding added, so spaces after it are
    optional; `%n` ends the line."""
    out: list[str] = []
    used: set[str] = set()
    position = 0
    padded = False
    head = ""
    message_at = 0
    message_end = 0
    after = ""  # the pattern after an unpadded %m, up to %n
    for spec in _SPEC.finditer(pattern):
        out.append(_literal(pattern[position:spec.start()], padded))
        position = spec.end()
        conv, padded = spec["conv"], bool(spec["mod"])
        if conv == "n":
            after = after and pattern[message_end:spec.start()]
            break
        if conv == "%":
            out.append("%")
            continue
        if conv not in _CONVERSIONS:
            raise PatternError(f"{name}: unknown conversion %{conv} in {pattern!r} (known: "
                               f"{' '.join('%' + c for c in sorted(_CONVERSIONS) if len(c) == 1)} %n %%)")
        regex, group = _CONVERSIONS[conv]
        if conv == "d" and spec["opt"]:
            regex = _date(spec["opt"][1:-1])
        if group == "msg":
            head, message_at, message_end = "".join(out), len(out), spec.end()
            after = "" if padded else pattern[message_end:]
        if group is not None and group not in used:
            used.add(group)
            out.append(f"(?P<{group}>{regex})")
        else:
            out.append(f"(?:{regex})")
        if padded:
            out.append(r"\s*")
    else:
        out.append(_literal(pattern[position:], padded))
    if "msg" not in used:
        raise PatternError(f"{name}: {pattern!r} has no %m, so no message can be read")
    tail_free = not "".join(out[message_at + 1:]).replace(r"\s*", "").replace(r"\ ", "")
    if out[message_at] == "(?P<msg>.*?)" and _one_split(after):
        out[message_at] = "(?P<msg>.*)"
    return Layout(name, pattern, re.compile("^" + "".join(out) + r"\s*$"), re.compile("^" + head), tail_free)


# Conversions whose values hold no whitespace.
_UNSPACED: Final = frozenset("pcCFLMrhi")


def _one_split(after: str) -> bool:
    """Whether a line can end a message in one place only: what follows %m is a space, then text without
    whitespace (literals, unpadded conversions of _UNSPACED), then the line's end. Then the last space before
    that text ends the message, and reading the message greedily (from the line's end back) finds the same
    end as reading it lazily, in far fewer steps ([%d] %p %m (%c), Kafka's default)."""
    if not after.startswith(" ") or len(after) < 2:
        return False
    position = 1
    for spec in _SPEC.finditer(after):
        if any(c.isspace() for c in after[position:spec.start()]) or spec["mod"] or spec["conv"] not in _UNSPACED:
            return False
        position = spec.end()
    return not any(c.isspace() for c in after[position:])


def _date(option: str) -> str:
    """A %d{...} option: a named format, or a SimpleDateFormat pattern (letters are fields, 'quoted' text
    and other characters literal; a zone may follow after a comma, as log4j 2 allows)."""
    form = option.split(",")[0].strip()
    if form in _NAMED_DATES:
        return _NAMED_DATES[form]
    out: list[str] = []
    for token in re.finditer(r"'([^']*)'|([A-Za-z])\2*|(.)", form):
        quoted, letter, other = token.groups()
        if letter:
            if letter in "GEaz" or (letter == "M" and len(token[0]) > 2):
                out.append(r"[A-Za-z]+")
            else:
                out.append(r"(?:Z|[-+]\d\d:?\d\d)" if letter in "ZXx" else r"\d+")
        else:
            out.append(re.escape(quoted if quoted is not None else other))
    return "".join(out)


def _literal(text: str, after_padding: bool) -> str:
    body = re.escape(text)
    return (r"\s*" + re.escape(text.lstrip(" "))) if after_padding and text.startswith(" ") else body


DEFAULT: Final = compile_pattern("[%d] %p %m (%c)%n", "kafka")
STRIMZI: Final = compile_pattern("%d{ISO8601} %p %m (%c) [%t]%n", "strimzi")
# Kafka's default with the date cut off, as lines are often quoted in bug reports.
UNDATED: Final = compile_pattern("%p %m (%c)%n", "kafka-undated")
KNOWN: Final[tuple[Layout, ...]] = (DEFAULT, STRIMZI, UNDATED)

# What tools put before the layout: indentation, `docker compose logs` (service, padding, "|", and with -t
# the time docker received the line), `grep -R` / `grep -n` (file name, line number).
_WRAPPERS: Final = re.compile(r"^\s*(?:[\w.-]+\s+\|\s?(?:\d{4}-\d\d-\d\dT[\d:.]+Z\s)?|"
                              r"[^\s:\[]+\.log(?:\.[\w-]+)?:(?:\d+[:-])?)?")
# A Java stack trace: frames, "Caused by", "... N more", and the exception line that heads it.
_STACK: Final = re.compile(r"^\s*at [\w$.<>/-]+\(|^\s*\.\.\. \d+ more|^Caused by: |^\s*Suppressed: |"
                           r"^(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable)\b")


def unwrap(text: str) -> str:
    if text[:1] == "[":  # neither prefix can begin so (Kafka's default layout does): spare the substitution
        return text
    return _WRAPPERS.sub("", text, count=1)


def starts_record(layout: Layout, text: str) -> bool:
    """Whether the line begins as the layout's lines do (when the layout has anything before %m)."""
    return bool(layout.head.pattern != "^") and layout.head.match(text) is not None


def is_stack_trace(text: str) -> bool:
    return _STACK.match(text) is not None


def detect(lines: list[str], candidates: tuple[Layout, ...] = KNOWN) -> Layout:
    """The candidate that matches most of the lines (the first on a tie, so Kafka's default wins)."""
    return max(candidates, key=lambda layout: sum(1 for text in lines if layout.match(unwrap(text))))
