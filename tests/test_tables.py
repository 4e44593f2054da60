"""The valid-previous-state tables: the model's (kcm.spec.states) agree with the TLA+ specification's and the
documentation's, and the implementation's (kcm.impl.states) are the model's."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.check.tables import partition_table, replica_table
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.impl.states import (
    VALID_PREVIOUS_PARTITION_STATES,
    VALID_PREVIOUS_REPLICA_STATES,
    PartitionState,
    ReplicaState,
)
from kcm.spec import states as model
from kcm.spec.states import Table
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.validate import validate_events

ROOT = Path(__file__).resolve().parents[1]


def _by_name(table: dict[PartitionState, frozenset[PartitionState]] | dict[ReplicaState, frozenset[ReplicaState]]
             ) -> Table:
    return {dst.value: frozenset(src.value for src in sources) for dst, sources in table.items()}


def _tla_table(name: str) -> Table:
    """A record of `target |-> {sources}` lines from spec/KafkaReplication.tla."""
    text = (ROOT / "spec" / "KafkaReplication.tla").read_text(encoding="utf-8")
    body = re.search(rf"^{name} ==\n(.*?)\]\n", text, re.M | re.S)
    assert body is not None, name
    rows = re.findall(r"(\w+)\s*\|->\s*\{([^}]*)\}", body.group(1))
    return {dst: frozenset(re.findall(r'"(\w+)"', sources)) for dst, sources in rows}


def _doc_table(heading: str) -> Table:
    """A table of docs/invariants.md whose first column is `heading`."""
    text = (ROOT / "docs" / "invariants.md").read_text(encoding="utf-8")
    block = text[text.index(f"| {heading} |"):].split("\n\n", 1)[0]
    rows = [line.split("|")[1:3] for line in block.splitlines()[2:]]
    return {dst.strip(" `"): frozenset(s.strip(" `") for s in sources.split(",")) for dst, sources in rows}


@pytest.mark.parametrize(("tla", "doc", "table"), [
    ("ValidPreviousPartition", "target partition state", model.VALID_PREVIOUS_PARTITION_STATES),
    ("ValidPreviousReplica", "target replica state", model.VALID_PREVIOUS_REPLICA_STATES),
])
def test_the_models_tables_are_the_specifications_and_the_docs(tla: str, doc: str, table: Table) -> None:
    assert _tla_table(tla) == table
    assert _doc_table(doc) == table


def test_the_models_states_are_the_tables_targets() -> None:
    assert set(model.PARTITION_STATES) == set(model.VALID_PREVIOUS_PARTITION_STATES)
    assert set(model.REPLICA_STATES) == set(model.VALID_PREVIOUS_REPLICA_STATES)
    assert model.PARTITION_STATES[0] == "NonExistentPartition" and model.REPLICA_STATES[0] == "NonExistentReplica"


def test_the_implementations_states_are_the_models() -> None:
    for enum, names in ((PartitionState, model.PARTITION_STATES), (ReplicaState, model.REPLICA_STATES)):
        assert {s.value for s in enum} == {s.name for s in enum} == set(names)


def test_the_implementations_tables_are_the_models() -> None:
    assert _by_name(VALID_PREVIOUS_PARTITION_STATES) == model.VALID_PREVIOUS_PARTITION_STATES
    assert _by_name(VALID_PREVIOUS_REPLICA_STATES) == model.VALID_PREVIOUS_REPLICA_STATES


def test_the_implementations_state_machines_accept_exactly_the_models_transitions() -> None:
    """Read off the predicates the state machines call, over every pair of states (the empty sets too)."""
    assert model.transitions(partition_table()) == model.VALID_PARTITION_TRANSITIONS
    assert model.transitions(replica_table()) == model.VALID_REPLICA_TRANSITIONS


@pytest.mark.parametrize("refusal", [
    ["partition", "t0-0", "OfflinePartition", "OnlinePartition"],
    ["replica", "t0-0", "2", "ReplicaDeletionIneligible", "OfflineReplica"],
])
def test_refusing_a_transition_the_model_allows_is_a_violation(refusal: list[str]) -> None:
    """The state machines refuse exactly the transitions the table forbids; the forbidden ones refused
    (`invalid_transitions`) are no violation, as the clean run shows."""
    events: list[Event] = []
    sim = Simulator(3, Knobs(), SimConfig(), events.append)
    sim.bootstrap()
    sim.run(300)
    assert InvariantChecker().check_all(events).ok and validate_events(events).failure is None
    planted = copy.deepcopy(events)
    at = next(e for e in planted if e["action"] == "BrokerChange")
    at["args"]["invalid_transitions"] = [refusal]
    violations = InvariantChecker().check_all(planted).violations
    assert [(v.seq, v.message) for v in violations] == [
        (at["seq"], f"{' replica '.join(refusal[1:-2])}: BrokerChange by {at['actor']} refused {refusal[-2]} -> "
                    f"{refusal[-1]}, a valid transition of the model's table")]
    failure = validate_events(planted).failure
    assert failure is not None and failure.seq == at["seq"] and failure.reason.endswith("refused")
