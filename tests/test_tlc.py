"""Reading TLC: values, states, its -tool messages; and a real run of TLC on a tiny model."""

from __future__ import annotations

import os
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from kcm.spec import child_processes
from kcm.spec.tlc.runner import (
    QUICK_JIT,
    TlcError,
    TlcResult,
    TlcSetupError,
    default_heap_mb,
    find_jar,
    find_java,
    parse_output,
    parse_state,
    parse_value,
    run_tlc,
    tlc_command,
)

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("-3", -3),
        ('"leader"', "leader"),
        ("TRUE", True),
        ("FALSE", False),
        ("<<>>", []),
        ("<<<<1, 2>>, <<2, 5>>>>", [[1, 2], [2, 5]]),
        ("{3, 1, 2}", [1, 2, 3]),
        ("{}", []),
        ('[leader |-> 2, isr |-> <<2, 3>>, role |-> "follower"]', {"leader": 2, "isr": [2, 3], "role": "follower"}),
        ("(1 :> 0 @@ 3 :> <<>>)", {"1": 0, "3": []}),
        ('("p0" :> 4)', {"p0": 4}),
        ("1..3", [1, 2, 3]),
        ("[p0 |-> [b1 |-> 1]]", {"p0": {"b1": 1}}),
    ],
)
def test_parse_value(text: str, value: object) -> None:
    assert parse_value(text) == value


@pytest.mark.parametrize("text", ["<<1, 2", "[a |-> ]", "(1 :> 2", "@@", "<<1>> 2"])
def test_parse_value_rejects_malformed_text(text: str) -> None:
    with pytest.raises((ValueError, IndexError)):
        parse_value(text)


def test_parse_state() -> None:
    state = parse_state('/\\ leader = [p0 |-> 1]\n/\\ isr = [p0 |-> {1, 2}]\n/\\ controller = -1\n')
    assert state == {"leader": {"p0": 1}, "isr": {"p0": [1, 2]}, "controller": -1}


def test_parse_output_of_a_violation() -> None:
    result = parse_output((DATA / "tlc_violation.out").read_text(), TlcResult(12))
    assert result.violated == "Inv" and result.violation_kind == "invariant"
    assert (result.distinct_states, result.generated_states, result.depth) == (4, 4, 4)
    assert [t.action for t in result.trace] == ["Init", "Next", "Next", "Next"]
    assert result.trace[-1].state["x"] == 3
    assert result.trace[1].state["f"] == [[[0, 7]], []]


def test_parse_output_of_a_run_stopped_after_a_progress_report() -> None:
    progress = (
        "@!@!@STARTMSG 2200:0 @!@!@\nProgress(12) at 2026-11-23 01:00:00: 1,234,567 states generated "
        "(61,728 s/min), 345,678 distinct states found (17,283 ds/min), 9,876 states left on queue.\n"
        "@!@!@ENDMSG 2200 @!@!@\n"
    )
    result = parse_output(progress, TlcResult(143, complete=False))
    assert (result.generated_states, result.distinct_states, result.violated) == (1_234_567, 345_678, None)
    # Stopped before its end: the depth of its last report.
    assert result.depth == 12
    assert not result.holds


def test_parse_output_of_a_simulation_counts_the_states_it_generated() -> None:
    simulated = (
        "@!@!@STARTMSG 2209:0 @!@!@\nProgress(-1) at 2026-12-06 21:42:20: 47144 states generated, -1 distinct "
        "states found, -1 states left on queue.\n@!@!@ENDMSG 2209 @!@!@\n"
    )
    result = parse_output(simulated, TlcResult(0))
    assert (result.generated_states, result.distinct_states) == (47_144, 0)


def test_missing_jar_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TLA2TOOLS_JAR", str(tmp_path / "nope.jar"))
    with pytest.raises(TlcSetupError, match="no such file"):
        find_jar()


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(TlcSetupError, match="Java 17 is required"):
        find_java()


def test_heap_is_bounded_and_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KCM_TLC_HEAP_MB", raising=False)
    assert default_heap_mb() == 4096
    monkeypatch.setenv("KCM_TLC_HEAP_MB", "1536")
    assert default_heap_mb() == 1536
    for bad in ("lots", "12"):
        monkeypatch.setenv("KCM_TLC_HEAP_MB", bad)
        with pytest.raises(TlcSetupError, match=f"KCM_TLC_HEAP_MB={bad}"):
            default_heap_mb()
    command = tlc_command("java", Path("t.jar"), "/tmp/m", 2, 1536, "M.cfg", "M.tla", ("-deadlock",))
    assert command[:2] == ["java", "-Xmx1536m"]
    assert command[command.index("-metadir") + 1] == "/tmp/m" and command[-2:] == ["-deadlock", "M.tla"]
    assert not set(QUICK_JIT) & set(command)
    quick = tlc_command("java", Path("t.jar"), "/tmp/m", 1, 1536, "M.cfg", "M.tla", quick=True)
    assert set(QUICK_JIT) <= set(quick[:quick.index("tlc2.TLC")])


COUNTER = (
    "---- MODULE Counter ----\nEXTENDS Naturals\nVARIABLE x\n"
    "Init == x = 0\nStep == x < 5 /\\ x' = x + 1\nBelow3 == x < 3\nBelow9 == x < 9\n"
    "Forever == x' = x + 1\n====\n"
)


def test_tlc_finds_a_counterexample_and_proves_a_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    (tmp_path / "Counter.tla").write_text(COUNTER)
    (tmp_path / "bad.cfg").write_text("INIT Init\nNEXT Step\nINVARIANT Below3\n")
    (tmp_path / "good.cfg").write_text("INIT Init\nNEXT Step\nINVARIANT Below9\n")
    bad = run_tlc(tmp_path / "Counter.tla", tmp_path / "bad.cfg", heap_mb=512, extra_args=("-deadlock",))
    assert bad.violated == "Below3"
    assert [t.state["x"] for t in bad.trace] == [0, 1, 2, 3]
    assert [t.action for t in bad.trace] == ["Init", "Step", "Step", "Step"]
    good = run_tlc(tmp_path / "Counter.tla", tmp_path / "good.cfg", heap_mb=512, extra_args=("-deadlock",))
    assert good.holds and good.distinct_states == 6 and 0 < good.search_seconds <= good.seconds
    # TLC's state folder went to a temporary folder, removed afterwards; nothing beside the spec.
    assert not list(tmp_path.glob("states")) and not list(scratch.iterdir())


def test_a_budget_stops_tlc(tmp_path: Path) -> None:
    (tmp_path / "Counter.tla").write_text(COUNTER)
    (tmp_path / "forever.cfg").write_text("INIT Init\nNEXT Forever\n")
    result = run_tlc(tmp_path / "Counter.tla", tmp_path / "forever.cfg", heap_mb=512, budget_seconds=3)
    assert not result.complete and not result.holds and result.violated is None


def test_a_model_with_the_heartbeat_reports_progress_and_nothing_else_changes(tmp_path: Path) -> None:
    from kcm.spec.tlc.runner import HEARTBEAT_DEFINITION, HEARTBEAT_OPERATOR, HEARTBEAT_STATES, TlcProgress

    steps = 3 * HEARTBEAT_STATES
    (tmp_path / "Long.tla").write_text(
        f"---- MODULE Long ----\nEXTENDS Naturals, TLC\nVARIABLE x\nInit == x = 0\n"
        f"Step == x < {steps} /\\ x' = x + 1\nBelow == x <= {steps}\n{HEARTBEAT_DEFINITION}====\n")
    (tmp_path / "long.cfg").write_text(f"INIT Init\nNEXT Step\nINVARIANT Below\nCONSTRAINT {HEARTBEAT_OPERATOR}\n")
    seen: list[TlcProgress] = []
    result = run_tlc(tmp_path / "Long.tla", tmp_path / "long.cfg", heap_mb=512, on_progress=seen.append,
                     extra_args=("-deadlock",))
    assert result.holds and result.distinct_states == steps + 1 and not result.errors
    heartbeats = [p for p in seen if p.distinct % HEARTBEAT_STATES == 0]
    assert [p.distinct for p in heartbeats] == [HEARTBEAT_STATES * k for k in range(1, 4)]
    # One state per level: the depth is the count.
    assert all(p.depth in (p.distinct - 1, p.distinct) for p in heartbeats)
    # The growth by depth: each depth once, in order, with the states found when the search reached it.
    depths = [depth for depth, _, _ in result.growth]
    assert depths == sorted(set(depths)) and len(depths) >= 3
    assert all(distinct in (depth, depth + 1) for depth, distinct, _ in result.growth)
    assert "distinct states, depth" in seen[-1].text() and "states/s" in seen[-1].text()


@pytest.mark.parametrize(("heap_mb", "reason"), [
    (-5, "Invalid maximum heap size: -Xmx-5m"),
    # Framed by "Error occurred during initialization of VM": the reason is the line after it.
    (10**9, "Could not reserve enough space for 1024000000000KB object heap"),
])
def test_a_jvm_that_does_not_start_is_reported_in_its_own_words(heap_mb: int, reason: str, tmp_path: Path) -> None:
    (tmp_path / "Counter.tla").write_text(COUNTER)
    (tmp_path / "good.cfg").write_text("INIT Init\nNEXT Step\nINVARIANT Below9\n")
    with pytest.raises(TlcError) as raised:
        run_tlc(tmp_path / "Counter.tla", tmp_path / "good.cfg", heap_mb=heap_mb)
    assert str(raised.value) == f"Counter.tla: TLC exited with code 1: {reason}"


def test_a_jar_without_tlc_is_reported_in_the_jvm_s_own_words(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "empty.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    monkeypatch.setenv("TLA2TOOLS_JAR", str(jar))
    (tmp_path / "Counter.tla").write_text(COUNTER)
    (tmp_path / "good.cfg").write_text("INIT Init\nNEXT Step\nINVARIANT Below9\n")
    with pytest.raises(TlcError, match=r"^Counter.tla: TLC exited with code 1: Error: Could not find or load main "
                                       r"class tlc2.TLC$"):
        run_tlc(tmp_path / "Counter.tla", tmp_path / "good.cfg", heap_mb=512)


def test_tlc_s_java_leads_a_process_group_of_its_own_owned_by_kcm(tmp_path: Path) -> None:
    (tmp_path / "Counter.tla").write_text(COUNTER)
    (tmp_path / "good.cfg").write_text("INIT Init\nNEXT Step\nINVARIANT Below9\n")
    groups: list[tuple[int, int, bool]] = []
    spawn = child_processes.spawn

    def watched(command: list[str], detached: bool = False, **popen: Any) -> subprocess.Popen[Any]:
        process = spawn(command, detached, **popen)
        groups.append((process.pid, os.getpgid(process.pid), process.pid in child_processes._owned))
        return process

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(child_processes, "spawn", watched)
        assert run_tlc(tmp_path / "Counter.tla", tmp_path / "good.cfg", heap_mb=512, extra_args=("-deadlock",)).holds
    [(pid, group, owned)] = groups
    # Its own group (a terminal's Ctrl-C reaches kcm alone, which ends it), registered while it ran, not after.
    assert group == pid != os.getpgid(0) and owned and pid not in child_processes._owned
