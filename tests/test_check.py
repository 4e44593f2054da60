"""kcm check's plumbing: model configuration under knobs, TLC states to trace format v1; its --out (checked
before TLC starts, a counterexample never lost), --heap, --workers and the jar, each refused in one line."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import pytest

from kcm.spec.tlc import modelcheck
from kcm.spec.tlc.config import configure, knob_settings
from kcm.spec.tlc.modelcheck import diff_states, models, to_trace_state
from kcm.spec.trace.format import Event, TraceWriter, apply_delta, empty_state, read_trace
from kcm.spec.vocabulary import CORE_HOOKS, ERA_HOOKS, KNOB_CONSTANTS, Knobs
from kcm.tools.cli import main

BASE_CFG = """CONSTANTS
    Brokers = {1, 2}
    Truncation = "hw"
    UncleanElection = TRUE
INIT Init
NEXT Next
INVARIANTS
    TypeOK
    OneLeaderPerEpoch
"""


def test_a_configuration_sets_its_knobs_apart_from_the_defaults() -> None:
    assert knob_settings(BASE_CFG) == Knobs(truncation="hw", unclean_election=True)
    assert knob_settings("\\* UncleanElection = TRUE.  Expect ...\nCONSTANTS\n    MinIsr = 2\n") == Knobs(min_isr=2)


def test_configure_binds_every_knob_and_the_variant_hooks_once() -> None:
    knobs = Knobs(truncation="kip101", controller_epoch_fencing=False, min_isr=2)
    cfg = configure(BASE_CFG, knobs, None)
    assert 'Truncation = "kip101"' in cfg and "UncleanElection = FALSE" in cfg
    assert "ControllerEpochFencing = FALSE" in cfg and "LeaderEpochCheck = TRUE" in cfg and "MinIsr = 2" in cfg
    assert "TruncationOffset <- KIP101_TruncationOffset" in cfg and "ExposesHw <- KIP101_ExposesHw" in cfg
    assert '"hw"' not in cfg
    for name in (*KNOB_CONSTANTS.values(), *ERA_HOOKS, *CORE_HOOKS):
        assert len([line for line in cfg.splitlines() if line.split()[:1] == [name]]) == 1, name
    assert "Brokers = {1, 2}" in cfg and "OneLeaderPerEpoch" in cfg
    assert knob_settings(cfg) == knobs


def test_configure_replaces_the_invariants_when_asked() -> None:
    cfg = configure(BASE_CFG, Knobs(), ["NoCommittedDataLoss"])
    assert "OneLeaderPerEpoch" not in cfg and "TypeOK" not in cfg
    assert cfg.rstrip().endswith("INVARIANTS\n    NoCommittedDataLoss")
    assert "NEXT Next" in cfg and "ExposesHw <- KIP320_ExposesHw" in cfg


def test_the_spec_configurations_leave_the_bindings_to_kcm() -> None:
    for model in models().values():
        cfg = model.config.read_text()
        hooks = (*ERA_HOOKS, *CORE_HOOKS)
        assert not any(line.split()[:1] == [hook] for line in cfg.splitlines() for hook in hooks), model
    assert models()["zombiefixed"].module == models()["zombie"].module
    assert models()["opsshrink"].module == models()["ops"].module


def test_by_hand_a_configuration_is_completed_under_its_own_knobs() -> None:
    cfg = models()["kafka1211"].config.read_text()
    run = subprocess.run([sys.executable, "-m", "kcm.spec.tlc.config"], input=cfg, capture_output=True, text=True,
                         check=True)
    assert run.stdout == configure(cfg, Knobs(truncation="hw"))


TLA_STATE = {
    "controller": 2,
    "controller_epoch": 1,
    "assignment": {"p0": [1, 2]},
    "leader": {"p0": 1},
    "leader_epoch": {"p0": 0},
    "isr": {"p0": [2, 1]},
    "partition_controller_epoch": {"p0": 1},
    "partition_version": {"p0": 0},
    "acting_controller_epoch": [0, 1],
    "alive": [True, False],
    "broker_controller_epoch": [1, 0],
    "role": [{"p0": "leader"}, {"p0": "none"}],
    "local_leader_epoch": [{"p0": 0}, {"p0": -1}],
    "local_isr": [{"p0": [1, 2]}, {"p0": []}],
    "log": [{"p0": [[0, 1]]}, {"p0": [[0, 1]]}],
    "hw": [{"p0": 1}, {"p0": 0}],
    "hw_checkpoint": [{"p0": 0}, {"p0": 0}],
    "epoch_start_offset": [{"p0": 0}, {"p0": 0}],
    "partition_state": [{"p0": "NonExistentPartition"}, {"p0": "OnlinePartition"}],
    "replica_state": [{"p0": ["NonExistentReplica", "NonExistentReplica"]},
                      {"p0": ["OnlineReplica", "OfflineReplica"]}],
}


def test_tlc_state_becomes_trace_variables_with_absent_keys() -> None:
    state = to_trace_state(TLA_STATE)
    assert state["isr"] == {"p0": [1, 2]}
    assert state["alive"] == {"1": True, "2": False}
    assert state["role"] == {"1": {"p0": "leader"}}
    assert "2" not in state["local_leader_epoch"]
    assert state["log"]["2"] == {"p0": [[0, 1]]}
    assert state["epoch_start_offset"] == {"1": {"p0": 0}}
    assert state["partition_state"] == {"1": {}, "2": {"p0": "OnlinePartition"}}
    assert state["replica_state"]["2"] == {"p0": {"1": "OnlineReplica", "2": "OfflineReplica"}}


def test_deltas_rebuild_the_states() -> None:
    first = to_trace_state(TLA_STATE)
    later = dict(TLA_STATE, leader={"p0": 0}, leader_epoch={"p0": 1}, isr={"p0": [2]},
                 role=[{"p0": "none"}, {"p0": "follower"}], local_leader_epoch=[{"p0": -1}, {"p0": 1}])
    second = to_trace_state(later)
    delta = diff_states(first, second)
    assert delta["leader"] == {"p0": 0} and delta["role"] == {"1": {"p0": None}, "2": {"p0": "follower"}}
    assert "controller" not in delta and "log" not in delta
    rebuilt = empty_state()
    apply_delta(rebuilt, first)
    apply_delta(rebuilt, delta)
    assert pruned(rebuilt) == pruned(second)


def pruned(value: Any) -> Any:
    """Without empty inner maps: a delta empties a map by nulling its leaves, and keeps the map."""
    if not isinstance(value, dict):
        return value
    kept = {k: pruned(v) for k, v in value.items()}
    return {k: v for k, v in kept.items() if v != {}}


# -- --out: checked before TLC starts, and a counterexample never lost -------------------------------------


class FullDisk:
    """A trace writer on a disk that fills up after the search: it claims its path as the real one does, and
    every line fails to write. It wraps the writer rather than subclass it: the compiled TraceWriter (mypyc)
    refuses an interpreted subclass."""

    def __init__(self, target: str | Path, validate: bool = False) -> None:
        self._writer = TraceWriter(target, validate)

    def write(self, event: Event) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self) -> FullDisk:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._writer.__exit__(exc_type, exc, tb)


def no_tlc(*args: Any, **kwargs: Any) -> NoReturn:
    raise AssertionError("TLC started though the command had to stop before it")


@pytest.mark.tlc
def test_a_folder_given_as_out_gets_the_counterexample_inside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--model", "kafka1211", "--out", str(tmp_path), "--progress", "none"])
    out = capsys.readouterr().out
    trace = tmp_path / "kafka1211-counterexample.jsonl"
    assert code == 1 and f"counterexample written to {trace} (trace format v2)" in out
    assert [event["seq"] for event in read_trace(trace)] == list(range(9))


@pytest.mark.parametrize("out", ["/proc/kcm-test/x.jsonl", "FILE/x.jsonl"])
def test_an_out_that_cannot_be_written_is_one_line_before_tlc_starts(
        out: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "FILE").write_text("a file, not a folder\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(modelcheck, "run_tlc", no_tlc)
    code = main(["check", "--model", "kafka1211", "--out", out])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith(f"kcm: error: {out}: cannot write: ") and captured.err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


@pytest.mark.tlc
def test_a_counterexample_that_cannot_be_written_after_the_search_is_shown_and_exit_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modelcheck, "TraceWriter", FullDisk)
    out = tmp_path / "c.jsonl"
    code = main(["check", "--model", "kafka1211", "--out", str(out), "--progress", "none"])
    captured = capsys.readouterr()
    assert code == 1 and not out.exists() and not list(tmp_path.iterdir())
    assert "  8. " in captured.out and "why (NoCommittedDataLoss, step 8)" in captured.out
    assert f"counterexample not written: {out}: cannot write: No space left on device" in captured.out
    code = main(["check", "--model", "kafka1211", "--out", str(out), "--progress", "none", "--json"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert code == 1 and len(summary["counterexample"]) == 9 and summary["trace"] is None
    assert captured.err == (f"kcm: the counterexample (in the JSON above) was not written: {out}: cannot write: "
                            "No space left on device\n")


@pytest.mark.parametrize(("argv", "message"), [
    (["--heap", "-5"], "argument --heap: must be at least 256 MiB, not -5"),
    (["--heap", "lots"], "argument --heap: expected a whole number, not 'lots'"),
    (["--workers", "0"], "argument --workers: must be at least 1, not 0"),
])
def test_heap_and_workers_are_checked_as_arguments(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modelcheck, "run_tlc", no_tlc)
    assert main(["check", *argv]) == 2
    assert capsys.readouterr().err == f"kcm: error: kcm check: {message}\n"


@pytest.mark.parametrize(("jar", "message"), [
    ("FOLDER", "TLA2TOOLS_JAR=FOLDER: a folder, not tla2tools.jar"),
    ("absent.jar", "TLA2TOOLS_JAR=absent.jar: no such file"),
    ("text.jar", "TLA2TOOLS_JAR=text.jar: not a jar (not a zip archive)"),
])
def test_a_bad_jar_is_named_for_what_it_is(jar: str, message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "FOLDER").mkdir()
    (tmp_path / "text.jar").write_text("not a jar\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TLA2TOOLS_JAR", jar)
    assert main(["check", "--model", "kafka1211"]) == 2
    assert capsys.readouterr().err == f"kcm: error: {message}\n"
