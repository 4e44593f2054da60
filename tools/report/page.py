"""The one Jinja2 environment of the reports (autoescaped) and the writing of a page.

A page is one file: the stylesheet is included into it by the template, pictures are inline SVG, and a
Content-Security-Policy forbids every fetch, so the page opens from disk with nothing else at hand.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from kcm.spec.atomic_output import write_output
from kcm.spec.verdicts import UNOBSERVED, severity
from kcm.tools.report.timeline import epoch_colour


def knob_text(value: Any) -> str:
    """A knob's value as `--set` takes it: booleans are exactly true or false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def verdict_class(verdict: str) -> str:
    """A verdict's colour by what it means (kcm.spec.verdicts), whatever its words ("holds to depth 6"); an
    invariant left unobserved was not checked, so it is not shown as passed."""
    if verdict == UNOBSERVED:
        return "v-unknown"
    return ("v-pass", "v-fail", "v-unknown")[severity(verdict)]


@cache
def environment() -> Environment:
    env = Environment(loader=PackageLoader("kcm.tools.report", "templates"),
                      autoescape=select_autoescape(["html"]), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.globals["colour"] = epoch_colour
    env.filters["knob"] = knob_text
    env.filters["verdict_class"] = verdict_class
    return env


def render(template: str, **values: Any) -> str:
    return environment().get_template(template).render(**values)


def write(path: str | Path, template: str, **values: Any) -> Path:
    """Renders a page and publishes it whole (kcm.spec.atomic_output); a path that cannot be written is the
    user's error, on one line (OutputError)."""
    target = Path(path)
    write_output(target, render(template, **values))
    return target
