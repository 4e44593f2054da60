"""A design as one folder (kcm.spec.design_folder): its manifest read and checked, its strategy loaded by the
implementation, its hooks bound by TLC; tests/data/designs/ holds two designs that are not built in."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kcm.conformance.design_readings import readings
from kcm.conformance.explore.hunt import Hunt
from kcm.impl.design import Design, load_strategy, overridden_points
from kcm.spec.design_folder import DesignError, read_design
from kcm.spec.verdicts import AS_EXPECTED, HOLDS, UNOBSERVED, UNSUPPORTED, VIOLATED, combined, severity
from kcm.spec.vocabulary import Knobs
from kcm.tools.cli import main

DESIGNS = Path(__file__).parent / "data" / "designs"
EAGER, STRICT = DESIGNS / "eager-isr-join", DESIGNS / "strict-isr-join"


def test_the_designs_of_tests_data_read_whole() -> None:
    eager = read_design(EAGER)
    assert (eager.name, eager.base, eager.expected, eager.models) == (
        "eager-isr-join", Knobs(), frozenset({"NoCommittedDataLoss"}), ("deep",))
    assert eager.hooks == {"InSyncForExpansion": "EAGER_InSyncForExpansion"}
    assert eager.changed_points == ("isr-expansion",)
    strategy = load_strategy(eager)
    assert isinstance(strategy, Design) and strategy.name == "eager-isr-join"
    assert overridden_points(strategy) == ("isr-expansion",)
    assert overridden_points(Design(Knobs())) == ()
    assert read_design(STRICT / "design.toml").expected == frozenset()


def _copy(tmp_path: Path, source: Path = EAGER) -> Path:
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    return folder


# What is broken in the manifest (a line replaced), and the one line that says so.
BROKEN = [
    ('models = ["deep"]', 'models = ["deep"', "design.toml:9: Unclosed array"),
    ('models = ["deep"]', "models = []", "design.toml:7: models: must contain at least 1 items"),
    ('base = "defaults"', 'base = "truncation=kip999"', "design.toml:4: base: "),
    ('base = "defaults"', "base = 3", "design.toml:4: base: must be string"),
    ('expected = ["NoCommittedDataLoss"]', 'expected = ["NoDataLoss"]', "design.toml:5: expected: 'NoDataLoss' is no"),
    ('hooks = { InSyncForExpansion = "EAGER_InSyncForExpansion" }', 'hooks = { InSync = "EAGER_InSyncForExpansion" }',
     "design.toml:11: tla.hooks.InSync: no hook of the core is called so"),
    ('hooks = { InSyncForExpansion = "EAGER_InSyncForExpansion" }', 'hooks = { InSyncForExpansion = "EAGER_Other" }',
     "design.toml:11: tla.hooks.InSyncForExpansion: EagerIsrJoin.tla defines no operator EAGER_Other"),
    ('module = "EagerIsrJoin.tla"', 'module = "../x.tla"', "design.toml:10: tla.module: must name a file inside"),
    ('strategy = "strategy.py"', 'strategy = "missing.py"',
     "design.toml:14: python.strategy: no such file: missing.py"),
    ('class = "EagerIsrJoin"', 'class = "Nope"', "design.toml:15: python.class: strategy.py defines no subclass"),
    ('name = "eager-isr-join"', 'nom = "eager-isr-join"', "design.toml:1: "),
]


@pytest.mark.parametrize(("old", "new", "said"), BROKEN, ids=[b[1] for b in BROKEN])
def test_a_bad_manifest_is_one_line_naming_file_line_and_field(tmp_path: Path, old: str, new: str, said: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy(tmp_path)
    manifest = folder / "design.toml"
    text = manifest.read_text()
    assert old in text
    manifest.write_text(text.replace(old, new))
    assert main(["sim", "--design", str(folder), "--steps", "10", "--out", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"kcm: error: {folder}/{said}"), err
    assert not (tmp_path / "t.jsonl").exists()


# Known bugs appended to the manifest (after its own, bugs.0), and the one line that says what is wrong.
BAD_BUGS = [
    ('[[bugs]]\nlabel = "x"\ninvariant = "ReplicaLogsAgree"\n',
     "design.toml:30: bugs.1.invariant: 'ReplicaLogsAgree' is not among what the design is expected to break"),
    ('[[bugs]]\nlabel = "x"\ninvariant = "NoCommittedDataLoss"\n[bugs.bmc]\ndepth = 4\n',
     "design.toml:31: bugs.1.bmc: a BMC story runs on the bounds of the bug's reproduction model"),
    ('[[bugs]]\nlabel = "x"\ninvariant = "NoCommittedDataLoss"\n[[bugs]]\nlabel = "y"\n'
     'invariant = "NoCommittedDataLoss"\n[[bugs.searches]]\nname = "y"\nmachine = "network"\nexamples = 9\n',
     "design.toml:36: bugs.2.searches.0.machine: must be one of ['protocol', 'cluster', 'replication']"),
]


@pytest.mark.parametrize(("bugs", "said"), BAD_BUGS, ids=["not-expected", "bmc-without-model", "second-bug"])
def test_a_bad_known_bug_is_one_line_naming_its_line_and_field(tmp_path: Path, bugs: str, said: str) -> None:
    folder = _copy(tmp_path)
    manifest = folder / "design.toml"
    manifest.write_text(manifest.read_text() + "\n" + bugs)
    with pytest.raises(DesignError) as raised:
        read_design(folder)
    assert str(raised.value).startswith(f"{folder}/{said}"), raised.value


@pytest.mark.parametrize(("line", "said"), [
    ("    def in_sync_for_expansion(self", "strategy.py:9: does not parse"),
    ("raise RuntimeError('x')", "strategy.py:9: does not load: RuntimeError: x"),
])
def test_a_strategy_that_does_not_load_is_one_line(tmp_path: Path, line: str, said: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy(tmp_path)
    strategy = folder / "strategy.py"
    strategy.write_text(strategy.read_text() + line + "\n")
    assert main(["sim", "--design", str(folder), "--steps", "10", "--out", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"kcm: error: {folder}/{said}"), err


def test_a_missing_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--design", str(tmp_path / "none"), "--out", str(tmp_path / "t.jsonl")]) == 2
    assert capsys.readouterr().err == (f"kcm: error: {tmp_path / 'none' / 'design.toml'}:0: no such file (a design "
                                       "folder holds design.toml)\n")


def test_the_simulator_runs_the_designs_strategy_and_replay_needs_the_design(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "eager.jsonl"
    assert main(["sim", "--design", str(EAGER), "--seed", "1", "--steps", "3000", "--progress", "none",
                 "--out", str(trace)]) == 0
    assert "design eager-isr-join on defaults" in capsys.readouterr().out
    assert main(["check-trace", str(trace)]) == 1
    assert "NoCommittedDataLoss" in capsys.readouterr().out
    assert main(["replay", str(trace)]) == 2
    assert "made by the design 'eager-isr-join': replay it with --design" in capsys.readouterr().err
    assert main(["replay", str(trace), "--design", str(EAGER)]) == 0
    assert "breaks NoCommittedDataLoss as the trace does" in capsys.readouterr().out
    # The same seed on the safe design breaks nothing: the strategy made the difference.
    safe = tmp_path / "s.jsonl"
    assert main(["sim", "--seed", "1", "--steps", "3000", "--progress", "none", "--out", str(safe)]) == 0
    assert main(["check-trace", str(safe)]) == 0


@pytest.mark.tlc
def test_tlc_checks_the_designs_hooks_and_the_counterexample_replays_with_its_strategy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cex.jsonl"
    assert main(["check", "--design", str(EAGER), "--invariant", "NoCommittedDataLoss", "--progress", "none",
                 "--out", str(out)]) == 1
    assert "model deep (design eager-isr-join on defaults (safe design)): violated NoCommittedDataLoss" in \
        capsys.readouterr().out
    assert main(["replay", str(out), "--design", str(EAGER)]) == 0
    assert "breaks NoCommittedDataLoss as the trace does" in capsys.readouterr().out


@pytest.mark.tlc
def test_tlc_finds_the_safe_design_safe_on_its_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--design", str(STRICT), "--progress", "none", "--out", "/tmp/kcm-strict-unused"]) == 0
    assert "model ci (design strict-isr-join on defaults (safe design)): holds" in capsys.readouterr().out


def test_design_error_names_file_line_and_field() -> None:
    err = DesignError(Path("d/design.toml"), 3, "base", "bad")
    assert str(err) == "d/design.toml:3: base: bad"


def test_the_conformance_campaign_runs_the_designs_strategy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The state machines drive a cluster running the design's strategy and find what it breaks."""
    assert main(["conform", "--design", str(EAGER), "--examples", "300", "--progress", "none", "--json",
                 "--out", str(tmp_path / "conform")]) == 1
    assert "NoCommittedDataLoss" in {v["invariant"] for v in json.loads(capsys.readouterr().out)["violations"]}


@pytest.mark.tlc
def test_review_rows_of_a_design_are_as_expected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["review", "--design", str(EAGER), "--quick", "--json", "--progress", "none",
                 "--out", str(tmp_path / "review")]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["label"], r["verdict"]) for r in rows] == [("eager-isr-join (deep)", "as expected")]
    assert rows[0]["cells"]["NoCommittedDataLoss"]["result"] == "violated"
    # The safe design: its ci row holds on every invariant, exhaustively.
    assert main(["review", "--design", str(STRICT), "--quick", "--json", "--progress", "none",
                 "--out", str(tmp_path / "strict")]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["label"], r["verdict"]) for r in rows] == [("strict-isr-join (ci)", "as expected")]
    assert {cell["result"] for cell in rows[0]["cells"].values()} == {"holds"}


def _new(tmp_path: Path, base: str) -> Path:
    folder = tmp_path / "restated"
    assert main(["design", "new", "restated", "--from", base, "--out", str(folder)]) == 0
    return folder


def test_a_new_design_restates_its_base_and_runs_as_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kcm design new` writes every hook and rule of the base design: until edited, the design is its base, step
    for step in the simulator."""
    folder = _new(tmp_path, "truncation=hw")
    assert "design restated on truncation=hw" in capsys.readouterr().out
    design = read_design(folder)
    assert design.base == Knobs(truncation="hw") and sorted(design.hooks) == sorted(
        ["TruncateOnBecomeFollower", "FenceCurrentLeaderEpoch", "EpochEndAnswer", "TruncationOffset",
         "InSyncForExpansion", "ExposesHw", "OfflineLeader", "RefusesLeaderEpoch", "AcceptsWrite",
         "RefusesControllerEpoch", "FencesControllerWrites", "BrokerEpochFencing"])
    assert type(load_strategy(design)).__name__ == "Restated"
    assert readings(design).problems == []  # every engine reads it, or says unsupported
    own, built_in = tmp_path / "own.jsonl", tmp_path / "built-in.jsonl"
    assert main(["sim", "--design", str(folder), "--seed", "3", "--steps", "1500", "--progress", "none",
                 "--out", str(own)]) == 0
    assert main(["sim", "--set", "truncation=hw", "--seed", "3", "--steps", "1500", "--progress", "none",
                 "--out", str(built_in)]) == 0
    ours, theirs = own.read_text().splitlines(), built_in.read_text().splitlines()
    assert '"design":"restated"' in ours[0] and ours[1:] == theirs[1:]
    assert main(["design", "new", "restated", "--out", str(folder)]) == 2
    assert "exists already" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["Upper", "a b", "x_y", ""])
def test_a_new_design_needs_a_plain_name(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["design", "new", name, "--out", str(tmp_path / "d")]) == 2
    assert "letters, digits and dashes" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


@pytest.mark.tlc
def test_tlc_checks_a_new_design_as_its_base(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _new(tmp_path, "truncation=hw")
    capsys.readouterr()
    assert main(["check", "--design", str(folder), "--model", "kafka1211", "--progress", "none",
                 "--out", str(tmp_path / "cex.jsonl")]) == 1
    assert "violated NoCommittedDataLoss" in capsys.readouterr().out


@pytest.mark.tlc
def test_hunt_races_tlcs_engines_on_a_design_and_replays_with_its_strategy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hunt", "--design", str(EAGER), "--invariant", "NoCommittedDataLoss", "--budget", "120", "--json",
                 "--progress", "none", "--out", str(tmp_path / "hunt")]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["invariant"] == "NoCommittedDataLoss" and "bmc" not in summary["engines"]
    assert summary["replay"].startswith("the implementation follows all") and "breaks NoCommittedDataLoss" in \
        summary["replay"]


def test_a_design_s_own_known_bug_is_searched_with_its_strategy() -> None:
    eager = read_design(EAGER)
    search = Hunt("deep", Knobs(), design=eager).steered_search()
    assert search is not None and search.name == "eager-isr-join-replication"
    assert search.config().design is eager and search.invariant == "NoCommittedDataLoss"
    assert Hunt("deep", Knobs(), ("ReplicaLogsAgree",), design=eager).steered_search() is None


def test_an_engine_that_cannot_read_a_design_is_shown_and_left_out_of_the_run() -> None:
    assert combined([UNSUPPORTED, HOLDS, AS_EXPECTED]) == HOLDS
    assert combined([VIOLATED, UNSUPPORTED]) == VIOLATED
    assert combined([UNSUPPORTED, UNOBSERVED]) == UNOBSERVED
    assert combined([UNSUPPORTED, UNSUPPORTED]) == UNSUPPORTED and severity(UNSUPPORTED) == 2


def test_verify_runs_the_designs_strategy_and_says_unsupported_where_an_engine_cannot_read_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--design", str(EAGER), "--only", "simulation", "--only", "z3", "--only", "pipeline",
                 "--seeds", "2", "--steps", "500", "--progress", "none", "--json", "--out", str(tmp_path / "v")])
    document = json.loads(capsys.readouterr().out)
    assert code == 1 and document["result"] == VIOLATED and document["design"]["name"] == "eager-isr-join"
    said = {(row["engine"], row["verdict"]) for row in document["stages"]}
    assert {("simulation", VIOLATED), ("z3", UNSUPPORTED), ("pipeline", UNSUPPORTED)} <= said
    z3 = next(row for row in document["stages"] if row["engine"] == "z3")
    assert z3["check"] == "design eager-isr-join" and "isr-expansion" in z3["detail"]


def test_verify_of_a_design_no_engine_run_can_read_does_not_pass(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--design", str(EAGER), "--only", "z3", "--progress", "none",
                 "--out", str(tmp_path / "v")]) == 2
    assert capsys.readouterr().err == ("kcm: error: no engine run could read the design eager-isr-join (every row "
                                       "unsupported): the run does not pass\n")


@pytest.mark.tlc
def test_verify_checks_the_ci_model_under_the_designs_hooks_and_its_review_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--design", str(EAGER), "--only", "tlc", "--progress", "none", "--json",
                 "--out", str(tmp_path / "v")])
    rows = {row["check"]: row["verdict"] for row in json.loads(capsys.readouterr().out)["stages"]}
    assert (code, rows) == (0, {"model ci": HOLDS, "review eager-isr-join (deep)": AS_EXPECTED})
