"""Results in the forms CI systems read: JUnit XML (one test case per row or cell), and on GitHub Actions the
markdown summary appended to `$GITHUB_STEP_SUMMARY` and `::error` annotations that point at the TLA+ action
of a counterexample's violating step (docs/ci.md).

The JUnit file is Apache Ant's format, the one CI systems read (testsuites > testsuite > testcase with a
failure or an error, its `message` and text). GitHub's
workflow commands escape `%`, CR and LF in a message, and also `:` and `,` in a property value
(docs.github.com, "Workflow commands for GitHub Actions").
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from xml.etree import ElementTree

from kcm.spec.atomic_output import write_output
from kcm.spec.verdicts import HOLDS, UNEXPECTED, UNKNOWN, UNOBSERVED, UNSUPPORTED, VIOLATED, passed
from kcm.spec.vocabulary import Knobs

SUMMARY_VARIABLE: Final = "GITHUB_STEP_SUMMARY"


@dataclass(frozen=True)
class Case:
    """One test case: `suite.name`, failed with `failure`, or in error with `error` (a check that decided
    nothing: unknown, unobserved, unsupported; `error_type` says which), else passed. A message's first line is
    the element's `message`, the whole text its content."""

    suite: str
    name: str
    seconds: float = 0.0
    failure: str | None = None
    error: str | None = None
    error_type: str = "unknown"


def junit_xml(name: str, cases: list[Case], hostname: str | None = None, when: datetime | None = None) -> str:
    """The cases as Apache Ant's JUnit XML (the schema CI systems read; `tests/test_ci_results.py` validates
    against the XSD of Maven Central's com.github.baev:junit-model), one testsuite per suite, in order."""
    suites: dict[str, list[Case]] = {}
    for case in cases:
        suites.setdefault(case.suite, []).append(case)
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S")
    host = hostname or socket.gethostname() or "localhost"
    root = ElementTree.Element("testsuites")
    root.append(ElementTree.Comment(f" {name} "))
    for index, (suite_name, members) in enumerate(suites.items()):
        suite = ElementTree.SubElement(root, "testsuite", name=suite_name, timestamp=stamp, hostname=host,
                                       tests=str(len(members)),
                                       failures=str(sum(c.failure is not None for c in members)),
                                       errors=str(sum(c.failure is None and c.error is not None for c in members)),
                                       time=f"{sum(c.seconds for c in members):.3f}", package="kcm", id=str(index))
        ElementTree.SubElement(suite, "properties")
        for case in members:
            element = ElementTree.SubElement(suite, "testcase", name=case.name, classname=suite_name,
                                             time=f"{case.seconds:.3f}")
            if case.failure is not None:
                outcome = ElementTree.SubElement(element, "failure", message=case.failure.splitlines()[0],
                                                 type="violated")
                outcome.text = case.failure
            elif case.error is not None:
                outcome = ElementTree.SubElement(element, "error", message=case.error.splitlines()[0],
                                                 type=case.error_type)
                outcome.text = case.error
        ElementTree.SubElement(suite, "system-out")
        ElementTree.SubElement(suite, "system-err")
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def write_junit(path: Path, name: str, cases: list[Case]) -> None:
    write_output(path, junit_xml(name, cases))


# -- GitHub Actions ----------------------------------------------------------------------------------------


def on_github() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def append_summary(markdown: str) -> bool:
    """Appends to the step summary when GitHub Actions names one; False when there is none."""
    target = os.environ.get(SUMMARY_VARIABLE)
    if not on_github() or not target:
        return False
    with open(target, "a", encoding="utf-8") as summary:
        summary.write(markdown.rstrip("\n") + "\n\n")
    return True


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def error_annotation(message: str, file: str | None = None, line: int | None = None, title: str | None = None) -> str:
    """One `::error` workflow command."""
    properties = [f"{key}={_property(value)}" for key, value in
                  (("file", file), ("line", None if line is None else str(line)), ("title", title)) if value]
    return f"::error {','.join(properties)}::{_data(message)}" if properties else f"::error::{_data(message)}"


def action_definition(action: str, folders: list[Path]) -> tuple[Path, int] | None:
    """Where the TLA+ action `action` is defined (`Action(...) ==` or `Action ==` at a line's start), in the
    first module of `folders` that defines it."""
    pattern = re.compile(rf"^{re.escape(action)}\s*(\([^)]*\))?\s*==", re.M)
    for folder in folders:
        for module in sorted(folder.glob("*.tla")):
            text = module.read_text()
            found = pattern.search(text)
            if found is not None:
                return module, text.count("\n", 0, found.start()) + 1
    return None


def _in_workspace(path: Path) -> str | None:
    """A path as an annotation names it: as given when relative (the repository's), else relative to the
    workspace (GITHUB_WORKSPACE, else the working folder); None outside it."""
    if not path.is_absolute():
        return str(path)
    base = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return None


def counterexample_annotation(events: list[Any], message: str, title: str, folders: list[Path],
                              in_repository: Callable[[Path], Path] = lambda path: path,
                              fallback: Path | None = None) -> str:
    """An `::error` at the TLA+ action of a counterexample's violating step (its last event), found in
    `folders` (a design's module first, then spec/), named as the repository names it (`in_repository`: a
    path of an exported revision mapped back) relative to the workspace. With a `fallback` (a design's
    module), an action outside the workspace (kcm's own core) is annotated there instead, its place told."""
    action = str(events[-1]["action"]) if events else None
    where = action_definition(action, folders) if action else None
    if where is not None:
        shown = _in_workspace(in_repository(where[0]))
        if shown is not None or fallback is None:
            return error_annotation(message, shown or str(where[0]), where[1], title)
        message += f"; violating step: {action} ({where[0].name}:{where[1]} of kcm's spec/)"
    if fallback is None:
        return error_annotation(message, title=title)
    return error_annotation(message, _in_workspace(in_repository(fallback)) or str(fallback), 1, title)


# -- the test cases of each command ------------------------------------------------------------------------


def review_cases(document: dict[str, Any]) -> list[Case]:
    """A case per cell of `kcm review`'s matrix: a failure where the row is not as documented because of the
    cell (a violation it is not documented to have, a documented one it does not show, no decision)."""
    cases = []
    for row in document["rows"]:
        expected = set(row["expected_violations"])
        for column, cell in row["cells"].items():
            result, seconds = cell["result"], float(cell.get("seconds", 0.0))
            failure = None
            if result == VIOLATED and column not in expected:
                steps = (cell.get("trace_length") or 1) - 1
                failure = (f"{column} violated in {steps} steps on the {row['model']} model, not documented"
                           f"\ncounterexample: {cell.get('trace') or 'not written'} (kcm report draws it)"
                           f"\nreproduce: kcm check --model {row['model']} "
                           + "".join(f"--set {s} " for s in Knobs.from_dict(row["knobs"]).settings())
                           + f"--invariant {column}")
            elif result == HOLDS and column in expected and not row.get("quick"):
                failure = f"{column} holds on the {row['model']} model: the design is documented to break it"
            error = None
            if result in (UNKNOWN, UNOBSERVED, UNSUPPORTED):
                error = f"{column}: {result}" + (f": {cell['error']}" if cell.get("error") else "")
            cases.append(Case(str(row["label"]), column, seconds, failure, error, result))
    return cases


def stage_cases(rows: list[dict[str, Any]]) -> list[Case]:
    """A case per row of `kcm verify`'s table: suite = engine, name = check."""
    cases = []
    for row in rows:
        verdict = str(row["verdict"])
        failure = error = None
        if verdict in (VIOLATED, UNEXPECTED):
            failure = f"{row['check']}: {verdict}: {row['detail']}"
            if row.get("trace"):
                failure += f"\ncounterexample: {row['trace']} (kcm report draws it)"
        elif not passed(verdict):
            error = f"{row['check']}: {verdict}: {row['detail']}"
        cases.append(Case(str(row["engine"]), str(row["check"]), float(row["seconds"]), failure, error, verdict))
    return cases


def property_cases(suite: str, rows: list[dict[str, Any]]) -> list[Case]:
    """A case per row of `kcm prove`'s table (property, result, seconds, detail)."""
    cases = []
    for row in rows:
        result = str(row["result"])
        text = f"{row['property']}: {result}: {row.get('detail', '')}"
        cases.append(Case(suite, str(row["property"]), float(row["seconds"]), text if result == VIOLATED else None,
                          text if result != VIOLATED and not passed(result) else None, result))
    return cases
