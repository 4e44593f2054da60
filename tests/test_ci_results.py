"""The CI-native outputs: JUnit XML valid against Apache Ant's JUnit schema (Windy Road's XSD, as Maven
Central's com.github.baev:junit-model ships it, fetched by Maven and read by the JDK's own validator), one case
per row or cell, and the cases of each command."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kcm.conformance.ci_results import Case, junit_xml, property_cases, review_cases, stage_cases

SCHEMA_ARTIFACT = "com.github.baev:junit-model:1.0"
VALIDATOR = Path(__file__).parent / "data" / "junit" / "ValidateJunit.java"
WHEN = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)

REVIEW = {"rows": [
    {"label": "defaults (kip320)", "model": "ci", "expected_violations": [], "quick": False, "knobs": {},
     "cells": {"LeaderInIsr": {"result": "holds", "seconds": 1.5},
               "NoCommittedDataLoss": {"result": "violated", "trace_length": 9, "trace": "a.jsonl"},
               "TypeOK": {"result": "unknown", "error": "TLC: out of memory"}}},
    {"label": "truncation=hw", "model": "kafka1211", "expected_violations": ["NoCommittedDataLoss"], "quick": False,
     "knobs": {"truncation": "hw"},
     "cells": {"NoCommittedDataLoss": {"result": "violated", "trace_length": 9},
               "LeaderInIsr": {"result": "unsupported", "error": "TLC cannot read it"}}},
]}
STAGES = [{"engine": "tlc", "check": "ci", "verdict": "holds", "detail": "114,052 states", "seconds": 55.7},
          {"engine": "z3", "check": "induction", "verdict": "violated", "detail": "LeaderInIsr", "seconds": 1.0,
           "trace": "cex.jsonl"},
          {"engine": "pipeline", "check": "LeaderInIsr", "verdict": "unobserved", "detail": "no run", "seconds": 0}]


def outcomes(cases: list[Case]) -> dict[str, str]:
    return {f"{c.suite}/{c.name}": "failure" if c.failure else c.error_type if c.error else "pass" for c in cases}


def test_a_review_cell_fails_where_the_row_is_not_as_documented() -> None:
    assert outcomes(review_cases(REVIEW)) == {
        "defaults (kip320)/LeaderInIsr": "pass", "defaults (kip320)/NoCommittedDataLoss": "failure",
        "defaults (kip320)/TypeOK": "unknown", "truncation=hw/NoCommittedDataLoss": "pass",
        "truncation=hw/LeaderInIsr": "unsupported"}
    failure = review_cases(REVIEW)[1].failure or ""
    assert "reproduce: kcm check --model ci --invariant NoCommittedDataLoss" in failure


def test_verify_and_prove_rows_are_cases() -> None:
    assert outcomes(stage_cases(STAGES)) == {"tlc/ci": "pass", "z3/induction": "failure",
                                             "pipeline/LeaderInIsr": "unobserved"}
    rows = [{"property": "p", "result": "holds", "seconds": 0.1}, {"property": "q", "result": "violated",
                                                                   "seconds": 0.2}]
    assert outcomes(property_cases("kcm prove", rows)) == {"kcm prove/p": "pass", "kcm prove/q": "failure"}


@pytest.fixture(scope="module")
def junit_schema(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mvn") is None:
        pytest.fail("Maven (mvn) is needed to fetch the JUnit schema from Maven Central (.ci/run installs it)")
    folder = tmp_path_factory.mktemp("junit-schema")
    subprocess.run(["mvn", "-q", "dependency:copy", f"-Dartifact={SCHEMA_ARTIFACT}", f"-DoutputDirectory={folder}"],
                   check=True, capture_output=True, timeout=300, cwd=folder)
    (jar,) = folder.glob("junit-model-*.jar")
    text = zipfile.ZipFile(jar).read("xsd/junit.xsd").decode()
    # The artifact puts Windy Road's Ant schema in a namespace of its own; Ant (and every CI system) writes none.
    namespace = 'targetNamespace="urn:junit.baev.github.com"'
    assert namespace in text
    text = text.replace(namespace, "").replace('xmlns:ns="urn:junit.baev.github.com"', "")
    text = text.replace('type="ns:', 'type="').replace('base="ns:', 'base="')
    schema = folder / "junit.xsd"
    schema.write_text(text)
    return schema


def validate(schema: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", str(VALIDATOR), str(schema), *map(str, files)], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.tlc
def test_every_command_s_junit_file_is_valid_against_the_junit_schema(junit_schema: Path, tmp_path: Path) -> None:
    files = []
    for name, cases in (("kcm review", review_cases(REVIEW)), ("kcm verify", stage_cases(STAGES)),
                        ("kcm prove", property_cases("kcm prove", [{"property": "p", "result": "holds",
                                                                     "seconds": 0.1}])),
                        ("kcm diff", [Case("row", "LeaderInIsr", failure="went from holds\nwhy: a & <b>")])):
        path = tmp_path / f"{name.replace(' ', '-')}.xml"
        path.write_text(junit_xml(name, cases, when=WHEN))
        files.append(path)
    checked = validate(junit_schema, *files)
    assert checked.returncode == 0, checked.stderr
    # The validator is not a rubber stamp: a suite without its hostname is refused.
    broken = tmp_path / "broken.xml"
    broken.write_text(re.sub(r' hostname="[^"]*"', "", files[0].read_text()))
    refused = validate(junit_schema, broken)
    assert refused.returncode == 1 and "hostname" in refused.stderr
