"""`kcm diff BASE HEAD`, the result cache and the CI-native outputs: a design change reviewed as a pull request."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.ci_results import Case, append_summary, error_annotation, junit_xml
from kcm.conformance.design_diff import Side, SideResult, compare, resolve_side
from kcm.conformance.result_cache import ResultCache, modules_read, row_key
from kcm.spec.atomic_output import claimed_in_place
from kcm.spec.design_folder import read_design
from kcm.spec.designs import Variant, design_rows
from kcm.spec.tlc import modelcheck
from kcm.tools.cli import main
from kcm.tools.json_schemas import validate

HOOK = "FOLLOWER_TRUNCATION_TruncateOnBecomeFollower == "
MODULE = f"""---- MODULE FollowerTruncation ----
EXTENDS TruncationKIP320

\\* Whether a new follower truncates to its own HW at once (before KIP-101) or asks its leader.
{HOOK}FALSE
====
"""
MANIFEST = """name = "follower-truncation"
summary = "When a new follower truncates its log."
follows = "Kafka 2.1 (KIP-320), ReplicaFetcherThread.scala"
base = "defaults"
expected = []
models = ["kafka1211"]

[tla]
module = "FollowerTruncation.tla"
hooks = { TruncateOnBecomeFollower = "FOLLOWER_TRUNCATION_TruncateOnBecomeFollower" }
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=kcm@example.org", "-c", "user.name=kcm", *args],
                   check=True, capture_output=True)


def design_repository(root: Path) -> Path:
    """A repository of one design: the first commit safe, the second truncating a new follower to its HW."""
    repo = root / "repo"
    design = repo / "designs" / "follower-truncation"
    design.mkdir(parents=True)
    (design / "design.toml").write_text(MANIFEST)
    (design / "FollowerTruncation.tla").write_text(MODULE)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "follower truncation as KIP-320")
    (design / "FollowerTruncation.tla").write_text(MODULE.replace(f"{HOOK}FALSE", f"{HOOK}TRUE"))
    git(repo, "commit", "-qam", "a new follower truncates to its HW")
    return repo


# -- the delta, on made-up sides ---------------------------------------------------------------------------


def side(rows: dict[str, dict[str, Any]]) -> SideResult:
    return SideResult(Side("x", None, []), rows)


def row(verdict: str, quick: bool = False, **cells: dict[str, Any]) -> dict[str, Any]:
    return {"verdict": verdict, "quick": quick, "cells": cells}


HELD = {"result": "holds", "distinct_states": 1000, "depth": 10}


def test_the_delta_names_the_cell_that_changed_and_whether_it_breaks_what_base_held() -> None:
    base = side({"r": row("as expected", LeaderInIsr=HELD, NoCommittedDataLoss=HELD)})
    head = side({"r": row("unexpected", LeaderInIsr=HELD,
                          NoCommittedDataLoss={"result": "violated", "distinct_states": 50, "trace_length": 9})})
    delta = compare(base, head)
    assert [(c.row, c.column, c.base, c.head, c.breaks) for c in delta.cells] == [
        ("r", "NoCommittedDataLoss", "holds", "violated", True)]
    assert delta.verdicts == [("r", "as expected", "unexpected")]
    assert delta.breaks
    # The other direction fixes, and breaks nothing.
    back = compare(head, base)
    assert [c.breaks for c in back.cells] == [False] and not back.breaks


def test_a_quick_row_s_unreached_cells_are_no_change_and_sizes_move_beyond_the_tolerance_only() -> None:
    base = side({"r": row("as expected", LeaderInIsr=HELD, TypeOK=HELD)})
    head = side({"r": row("as expected", True, LeaderInIsr={**HELD, "distinct_states": 1005})})
    assert compare(base, head).cells == []
    assert [(s.measure, s.base, s.head) for s in compare(base, head).sizes] == [("distinct_states", 1000, 1005)]
    assert compare(base, head, tolerance=0.01).sizes == []
    assert compare(base, base).unchanged


def test_rows_added_and_removed_are_named() -> None:
    delta = compare(side({"old": row("as expected", TypeOK=HELD)}), side({"new": row("as expected", TypeOK=HELD)}))
    assert (delta.added, delta.removed, delta.breaks) == (["new"], ["old"], False)


# -- the cache ---------------------------------------------------------------------------------------------


@pytest.fixture
def spec_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The TLA+ modules and models of spec/, copied where a test may change them."""
    folder = tmp_path / "spec"
    folder.mkdir()
    for source in [*modelcheck.spec_dir().glob("*.tla"), *modelcheck.spec_dir().glob("*.cfg")]:
        shutil.copy(source, folder / source.name)
    monkeypatch.setattr(modelcheck, "spec_dir", lambda: folder)
    monkeypatch.setattr("kcm.conformance.result_cache.spec_dir", lambda: folder)
    return folder


def test_a_row_reads_its_model_its_era_and_what_they_extend() -> None:
    names = {p.stem for p in modules_read(["MCkafka1211", "TruncationHW"], [modelcheck.spec_dir()])}
    assert {"MCkafka1211", "TruncationHW", "KafkaReplication"} <= names
    assert "TruncationKIP101" not in names and "KafkaControllerOps" not in names


def test_a_changed_module_invalidates_exactly_the_rows_that_read_it(spec_copy: Path, tmp_path: Path) -> None:
    hw = Variant("truncation=hw", ("truncation=hw",), "kafka1211")
    kip101 = Variant("truncation=kip101", ("truncation=kip101",), "kip101")
    kip320 = Variant("truncation=kip320", ("truncation=kip320",), "kip320")
    before = {v.label: row_key(v, False) for v in (hw, kip101, kip320)}
    module = spec_copy / "TruncationKIP101.tla"
    module.write_text(module.read_text().replace("====", "\\* a comment that changes the module\n====", 1))
    after = {v.label: row_key(v, False) for v in (hw, kip101, kip320)}
    assert [label for label in before if before[label] != after[label]] == ["truncation=kip101"]
    # The core module is read by every row.
    core = spec_copy / "KafkaReplication.tla"
    core.write_text(core.read_text() + "\n")
    assert all(row_key(v, False) != after[v.label] for v in (hw, kip101, kip320))
    # A quick row is another result.
    assert row_key(hw, True) != row_key(hw, False)


def test_a_changed_design_file_invalidates_its_rows_only(tmp_path: Path) -> None:
    repo = design_repository(tmp_path)
    design = read_design(repo / "designs" / "follower-truncation")
    (variant,) = design_rows(design)
    other = Variant("truncation=hw", ("truncation=hw",), "kafka1211")
    keys = row_key(variant, False), row_key(other, False)
    (design.path / "FollowerTruncation.tla").write_text(MODULE)
    assert row_key(variant, False) != keys[0] and row_key(other, False) == keys[1]


def test_the_cache_reads_back_what_it_kept_and_stays_within_its_bound(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache", limit_bytes=2000)
    cache.put("a" * 64, {"verdict": "as expected", "pad": "x" * 600})
    assert cache.get("a" * 64) == {"verdict": "as expected", "pad": "x" * 600}
    assert cache.get("b" * 64) is None and (cache.hits, cache.misses) == (1, 1)
    for key in "cdef":
        cache.put(key * 64, {"pad": "x" * 600})
    assert sum(p.stat().st_size for p in cache.entries()) <= 2000
    assert cache.get("f" * 64) is not None  # the newest is kept
    (tmp_path / "cache" / "ff" / f"{'f' * 64}.json").write_text("{not json")
    assert cache.get("f" * 64) is None  # a damaged entry is a miss, not an error


# -- CI-native outputs -------------------------------------------------------------------------------------


def test_annotations_escape_as_github_documents() -> None:
    line = error_annotation("50% lost\nat step 3", "spec/A.tla", 12, "kcm: a, b")
    assert line == "::error file=spec/A.tla,line=12,title=kcm%3A a%2C b::50%25 lost%0Aat step 3"


def test_the_summary_is_appended_only_on_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert not append_summary("# one") and not summary.exists()
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert append_summary("# one") and append_summary("# two")
    assert summary.read_text() == "# one\n\n# two\n\n"


def test_a_junit_file_has_a_case_per_cell_and_a_failure_with_its_message() -> None:
    text = junit_xml("kcm diff", [Case("row", "LeaderInIsr", 1.5), Case("row", "NoCommittedDataLoss",
                                                                        failure="went from holds\nwhy: ...")])
    assert 'tests="2" failures="1"' in text and 'message="went from holds"' in text


# -- the command -------------------------------------------------------------------------------------------


def test_a_revision_before_the_first_design_is_a_side_without_rows(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("designs to come\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "nothing yet")
    design = repo / "designs" / "follower-truncation"
    design.mkdir(parents=True)
    (design / "design.toml").write_text(MANIFEST)
    (design / "FollowerTruncation.tla").write_text(MODULE)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the first design")
    trees = tmp_path / "trees"
    before, after = resolve_side("HEAD~1", repo, trees), resolve_side("HEAD", repo, trees)
    assert before.designs == [] and [d.name for d in after.designs] == ["follower-truncation"]
    assert after.in_repository(after.designs[0].path) == Path("designs/follower-truncation")


def test_bad_sides_are_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "no-such-rev", "HEAD"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-rev: neither a design folder nor a revision" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["diff", str(empty), str(empty)]) == 2
    assert "no design folder in it" in capsys.readouterr().err
    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "empty")
    assert main(["diff", "HEAD", "HEAD"]) == 2
    assert "no design folder in HEAD" in capsys.readouterr().err


def test_a_diff_into_a_folder_another_kcm_writes_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = design_repository(tmp_path)
    out = tmp_path / "out"
    with claimed_in_place(out):
        assert main(["diff", "HEAD~1", "HEAD", "--repo", str(repo), "--out", str(out), "--progress", "none"]) == 2
    assert "another kcm process is writing it" in capsys.readouterr().err
    assert not (out / "diff.json").exists()


@pytest.mark.tlc
def test_a_hook_change_shows_exactly_that_cell_changed_and_the_same_revision_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    repo = design_repository(tmp_path)
    monkeypatch.setenv("KCM_OUT", str(tmp_path / "kcm-out"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(repo))
    junit = tmp_path / "diff.xml"
    code = main(["diff", "HEAD~1", "HEAD", "--repo", str(repo), "--json", "--progress", "none",
                 "--out", str(tmp_path / "out"), "--junit", str(junit), "--html", str(tmp_path / "diff.html")])
    printed = capsys.readouterr()
    document = json.loads(printed.out)
    validate("diff", document)
    assert code == 1 and document["breaks"]
    (change,) = document["cells_changed"]
    assert (change["row"], change["column"], change["base"], change["head"]) == (
        "follower-truncation (kafka1211)", "NoCommittedDataLoss", "holds", "violated")
    assert Path(change["trace"]).is_file() and change["explanation"][0].startswith("why (NoCommittedDataLoss")
    assert document["verdicts_changed"] == [{"row": "follower-truncation (kafka1211)", "base": "as expected",
                                             "head": "unexpected"}]
    # Under --json the annotations go to standard error (GitHub reads both streams): the output is the document.
    annotation = [line for line in printed.err.splitlines() if line.startswith("::error")]
    assert len(annotation) == 1
    assert "::error file=designs/follower-truncation/FollowerTruncation.tla,line=1," in annotation[0]
    assert "**HEAD breaks what BASE held.**" in (tmp_path / "summary.md").read_text()
    assert junit.read_text().count("<failure") == 1
    page = (tmp_path / "diff.html").read_text()
    assert "HEAD breaks what BASE held" in page
    assert 'href="#cex-follower-truncation-kafka1211-nocommitteddataloss"' in page
    # The same revision on both sides: nothing changed, every row read back from the cache.
    assert main(["diff", "HEAD", "HEAD", "--repo", str(repo), "--json", "--progress", "none",
                 "--out", str(tmp_path / "again")]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["unchanged"] and again["base"]["computed"] == again["head"]["computed"] == 0
