"""Results in the forms CI systems read: JUnit XML (one test case per row or cell), and on GitHub Actions the
markdown summary appended to `$GITHUB_STEP_SUMMARY` and `::error` annotations that point at the TLA+ action
of a counterexample's violating step (docs/ci.md).

The JUnit file follows the schema most CI systems read (testsuites > testsuite > testcase, a failure's
`message` and text); `tests/data/junit.xsd` is that schema, and the tests validate against it. GitHub's
workflow commands escape `%`, CR and LF in a message, and also `:` and `,` in a property value
(docs.github.com, "Workflow commands for GitHub Actions").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from xml.etree import ElementTree

from kcm.spec.atomic_output import write_output

SUMMARY_VARIABLE: Final = "GITHUB_STEP_SUMMARY"


@dataclass(frozen=True)
class Case:
    """One test case: `suite.name`, failed with `failure` (its message's first line and the whole text), or
    skipped with `skipped` (a cell not decided), else passed."""

    suite: str
    name: str
    seconds: float = 0.0
    failure: str | None = None
    skipped: str | None = None


def junit_xml(name: str, cases: list[Case]) -> str:
    suites: dict[str, list[Case]] = {}
    for case in cases:
        suites.setdefault(case.suite, []).append(case)
    root = ElementTree.Element("testsuites", name=name, tests=str(len(cases)),
                               failures=str(sum(c.failure is not None for c in cases)),
                               time=f"{sum(c.seconds for c in cases):.3f}")
    for suite_name, members in suites.items():
        suite = ElementTree.SubElement(root, "testsuite", name=suite_name, tests=str(len(members)),
                                       failures=str(sum(c.failure is not None for c in members)), errors="0",
                                       skipped=str(sum(c.skipped is not None for c in members)),
                                       time=f"{sum(c.seconds for c in members):.3f}")
        for case in members:
            element = ElementTree.SubElement(suite, "testcase", name=case.name, classname=suite_name,
                                             time=f"{case.seconds:.3f}")
            if case.failure is not None:
                failure = ElementTree.SubElement(element, "failure", message=case.failure.splitlines()[0],
                                                 type="violated")
                failure.text = case.failure
            elif case.skipped is not None:
                ElementTree.SubElement(element, "skipped", message=case.skipped)
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


def shown_path(path: Path, root: Path | None = None) -> str:
    """A path as an annotation names it: relative to the workspace (GITHUB_WORKSPACE, else `root` or the
    working folder) where it lies inside it."""
    base = Path(os.environ.get("GITHUB_WORKSPACE") or root or Path.cwd()).resolve()
    try:
        return str(path.resolve().relative_to(base))
    except ValueError:
        return str(path)
