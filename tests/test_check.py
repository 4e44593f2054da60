"""kcm check's plumbing: model configuration under knobs, TLC states to trace format v1."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from kcm.spec.tlc.config import configure, knob_settings
from kcm.spec.tlc.modelcheck import diff_states, models, to_trace_state
from kcm.spec.trace.format import apply_delta, empty_state
from kcm.spec.vocabulary import ERA_HOOKS, KNOB_CONSTANTS, Knobs

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
    for name in (*KNOB_CONSTANTS.values(), *ERA_HOOKS):
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
        assert not any(line.split()[:1] == [hook] for line in cfg.splitlines() for hook in ERA_HOOKS), model
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
