"""No vacuous holds: TLC's count of what each action of a model's next-state relation generated (`coverage`), so
that an action that never fires (and leaves the invariants holding vacuously of it) can be flagged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_diff import MANIFEST, MODULE

from kcm.spec.tlc import modelcheck
from kcm.spec.tlc.modelcheck import COVERAGE_MIN_HEAP_MB, check_model, model_knobs
from kcm.spec.tlc.runner import (
    COVERAGE_MINUTES,
    ActionCoverage,
    TlcResult,
    TlcSetupError,
    parse_output,
    run_tlc,
    tlc_command,
)
from kcm.tools.cli import main

# Room for TLC's cost model of kcm's spec (1.1 GiB live) and the search.
HEAP_MB = COVERAGE_MIN_HEAP_MB + 1024

# x counts to 3 and goes back to 0; Never's guard never holds; the third disjunct is no operator of its own.
STEPS = (
    "---- MODULE Steps ----\nEXTENDS Naturals\nVARIABLE x\nInit == x = 0\n"
    "Inc == x < 3 /\\ x' = x + 1\nNever == x > 7 /\\ x' = 0\n"
    "Next == Inc \\/ Never \\/ (x = 3 /\\ x' = 0)\n====\n"
)

# MCkafka2334's ReproNext: ProduceNext, FusedFetchNext, CrashNext, ControllerRequestsNext and BrokerChange.
KAFKA2334_ACTIONS = {"Produce", "FetchRound", "TruncationRound", "BrokerCrash", "BrokerRestart", "LeaderAndIsr",
                     "BrokerChange"}


def _report(*actions: str, end: bool = True) -> str:
    lines = ["@!@!@STARTMSG 2201:0 @!@!@\nThe coverage statistics at 2026-12-03 18:20:19\n@!@!@ENDMSG 2201 @!@!@\n"]
    lines += [f"@!@!@STARTMSG 2772:0 @!@!@\n{action}\n@!@!@ENDMSG 2772 @!@!@\n" for action in actions]
    lines += ["@!@!@STARTMSG 2202:0 @!@!@\nEnd of statistics.\n@!@!@ENDMSG 2202 @!@!@\n"] if end else []
    return "".join(lines)


CRASH = "<BrokerCrash line 897, col 1 to line 897, col 14 of module KafkaReplication>: 20:26"
TOPIC = "<TopicChange line 844, col 1 to line 844, col 14 of module KafkaReplication>: 0:0"


def test_the_last_complete_coverage_report_is_read() -> None:
    output = _report(CRASH.replace("20:26", "2:3")) + _report(CRASH, TOPIC) + _report(TOPIC, end=False)
    result = parse_output(output, TlcResult(0))
    assert result.coverage == {
        "BrokerCrash": ActionCoverage("BrokerCrash", "KafkaReplication", 897, 1, distinct=20, generated=26),
        "TopicChange": ActionCoverage("TopicChange", "KafkaReplication", 844, 1, distinct=0, generated=0),
    }
    assert result.never_fired == ["TopicChange"]
    assert result.coverage["BrokerCrash"].to_json() == {"module": "KafkaReplication", "line": 897, "distinct": 20,
                                                        "generated": 26}


def test_without_a_complete_report_coverage_is_not_measured() -> None:
    assert parse_output("", TlcResult(0)).coverage is None
    stopped = parse_output(_report(CRASH, end=False), TlcResult(143, complete=False))
    assert stopped.coverage is None and stopped.never_fired == []


def test_a_disjunct_of_no_operator_of_its_own_is_named_by_its_definition_and_placed_where_it_is() -> None:
    inline = "<Next line 7, col 1 to line 7, col 4 of module Steps (7 26 7 40)>: 0:1"
    again = "<Next line 7, col 1 to line 7, col 4 of module Steps (7 44 7 58)>: 0:0"
    coverage = parse_output(_report(inline, again), TlcResult(0)).coverage
    assert coverage == {"Next": ActionCoverage("Next", "Steps", 7, 26, 0, 1),
                        "Next@Steps:7:44": ActionCoverage("Next", "Steps", 7, 44, 0, 0)}


def test_coverage_asks_tlc_for_its_final_report_only_with_the_heap_for_its_cost_model() -> None:
    command = tlc_command("java", Path("t.jar"), "/tmp/m", 1, 4096, "M.cfg", "M.tla", ("-deadlock",), coverage=True)
    assert command[command.index("-coverage") + 1] == str(COVERAGE_MINUTES)
    assert "-Xms2048m" in command[:command.index("tlc2.TLC")]
    small = tlc_command("java", Path("t.jar"), "/tmp/m", 1, 512, "M.cfg", "M.tla", coverage=True)
    assert "-Xms512m" in small
    plain = tlc_command("java", Path("t.jar"), "/tmp/m", 1, 4096, "M.cfg", "M.tla")
    assert "-coverage" not in plain and not any(arg.startswith("-Xms") for arg in plain)


def test_a_heap_too_small_for_the_cost_model_is_refused_before_tlc_starts() -> None:
    with pytest.raises(TlcSetupError, match=f"at least {COVERAGE_MIN_HEAP_MB} MiB"):
        check_model("kafka2334fixed", model_knobs("kafka2334fixed"), heap_mb=1024, coverage=True)


@pytest.mark.tlc
def test_every_action_is_counted_exactly_and_one_that_never_fires_shows_zero(tmp_path: Path) -> None:
    (tmp_path / "Steps.tla").write_text(STEPS)
    (tmp_path / "Steps.cfg").write_text("INIT Init\nNEXT Next\n")
    result = run_tlc(tmp_path / "Steps.tla", tmp_path / "Steps.cfg", heap_mb=512, extra_args=("-deadlock",),
                     coverage=True)
    assert result.holds and (result.distinct_states, result.generated_states) == (4, 5)
    assert result.coverage == {"Inc": ActionCoverage("Inc", "Steps", 5, 1, distinct=3, generated=3),
                               "Never": ActionCoverage("Never", "Steps", 6, 1, distinct=0, generated=0),
                               "Next": ActionCoverage("Next", "Steps", 7, 26, distinct=0, generated=1)}
    assert result.never_fired == ["Never"]


@pytest.mark.tlc
def test_a_model_s_coverage_lists_every_action_of_its_next_with_tlc_s_counts() -> None:
    knobs = model_knobs("kafka2334fixed")
    covered = check_model("kafka2334fixed", knobs, heap_mb=HEAP_MB, coverage=True)
    assert covered.result.holds and covered.result.coverage is not None
    coverage = covered.result.coverage
    assert set(coverage) == KAFKA2334_ACTIONS
    assert all(a.module == "KafkaReplication" and a.line > 0 and 0 <= a.distinct <= a.generated
               for a in coverage.values())
    assert any(a.fired for a in coverage.values()) and covered.result.never_fired == []
    # The actions' counts add up to TLC's own, less the initial states (each distinct).
    initial = covered.result.distinct_states - sum(a.distinct for a in coverage.values())
    assert initial >= 1 and sum(a.generated for a in coverage.values()) + initial == covered.result.generated_states
    summary = covered.to_json()
    assert summary["coverage"]["BrokerChange"] == coverage["BrokerChange"].to_json()
    assert set(summary["coverage"]["BrokerChange"]) == {"module", "line", "distinct", "generated"}
    # Counting changes nothing of the search; without it, no coverage in the outcome.
    plain = check_model("kafka2334fixed", knobs, heap_mb=HEAP_MB)
    assert plain.result.coverage is None and "coverage" not in plain.to_json()
    assert (plain.result.distinct_states, plain.result.generated_states) == (covered.result.distinct_states,
                                                                             covered.result.generated_states)


@pytest.mark.tlc
def test_a_model_made_vacuous_shows_the_actions_that_never_fire(tmp_path: Path) -> None:
    """No crash allowed (MaxCrashes = 0): the invariants still hold, and coverage shows why they say nothing of
    crashes, restarts and the controller's handling of them."""
    name = "kafka2334fixed"
    for source in modelcheck.spec_dir().glob("*.tla"):
        shutil.copy(source, tmp_path / source.name)
    module, config = modelcheck._generate(tmp_path, modelcheck._model(name), model_knobs(name), None, None)
    text = config.read_text()
    assert "MaxCrashes = 1" in text
    config.write_text(text.replace("MaxCrashes = 1", "MaxCrashes = 0"))
    result = run_tlc(module, config, heap_mb=HEAP_MB, extra_args=("-deadlock",), coverage=True)
    assert result.holds and result.coverage is not None and set(result.coverage) == KAFKA2334_ACTIONS
    for action in ("BrokerCrash", "BrokerRestart"):
        assert (result.coverage[action].distinct, result.coverage[action].generated) == (0, 0)
        assert action in result.never_fired
    assert result.coverage["Produce"].fired and "Produce" not in result.never_fired


@pytest.mark.tlc
def test_verify_with_coverage_calls_a_model_that_cannot_crash_unexpected(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The ci model with its faults disabled in its configuration (no crash, no session expiry): every invariant
    holds, and `verify --coverage` says the holds is vacuous of the actions that never fired."""
    spec = tmp_path / "spec"
    spec.mkdir()
    for source in [*modelcheck.spec_dir().glob("*.tla"), *modelcheck.spec_dir().glob("*.cfg")]:
        shutil.copy(source, spec / source.name)
    config = spec / "MCci.cfg"
    text = config.read_text()
    assert "MaxCrashes = 1" in text and "MaxExpiries = 1" in text and "kcm unfired: TopicChange" in text
    config.write_text(text.replace("MaxCrashes = 1", "MaxCrashes = 0").replace("MaxExpiries = 1", "MaxExpiries = 0"))
    monkeypatch.setattr(modelcheck, "spec_dir", lambda: spec)
    # The safe design's rule restated by a design of its own, checked on ci.
    design = tmp_path / "design"
    design.mkdir()
    (design / "design.toml").write_text(MANIFEST.replace('models = ["kafka1211"]', 'models = ["ci"]'))
    (design / "FollowerTruncation.tla").write_text(MODULE)
    code = main(["verify", "--design", str(design), "--only", "tlc", "--coverage", "--json", "--progress", "none",
                 "--out", str(tmp_path / "out")])
    document = json.loads(capsys.readouterr().out)
    (row,) = document["stages"]
    assert code == 1 and row["verdict"] == "unexpected", row
    assert "vacuous" in row["detail"] and "BrokerCrash" in row["detail"] and "SessionExpire" in row["detail"]
    assert "TopicChange" not in row["detail"]  # the configuration says it never fires there
