"""The knob broker_epoch (KIP-380) in the implementation, the checker and the step validator: a request that
reaches a restarted broker is refused with it and applied without it, and the engines agree on both."""

from __future__ import annotations

import copy

import pytest
from histories import restarted_broker_requests

from kcm.conformance.check.invariants import InvariantChecker
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.validate import validate_events


def to_earlier_registration(events: list[Event]) -> list[Event]:
    """The deliveries of controller requests addressed to an earlier registration of their recipient."""
    return [e for e in events if e["args"].get("broker_epoch", 0) < e["args"].get("current_broker_epoch", 0)]


@pytest.mark.parametrize("broker_epoch", [True, False])
def test_a_request_to_an_earlier_registration_is_refused_exactly_with_the_knob(broker_epoch: bool) -> None:
    events = restarted_broker_requests("run", Knobs(broker_epoch=broker_epoch))
    stale = to_earlier_registration(events)
    # With KIP-380 only the LeaderAndIsr of the unseen bounce arrives (the one in flight went with the
    # crash); before 2.2 the one in flight is retried across the restart as well.
    assert sum(e["action"] == "LeaderAndIsr" for e in stale) == (1 if broker_epoch else 2)
    assert all(e["args"]["applied"] is not broker_epoch for e in stale)
    # Before 2.2 the controller never sees the bounces; with KIP-380 it fails and restarts broker 3 twice.
    bounces = [e for e in events if e["action"] == "BrokerChange" and e["args"].get("bounced")]
    assert len(bounces) == (2 if broker_epoch else 0)


@pytest.mark.parametrize("broker_epoch", [True, False])
def test_checker_and_validator_accept_both_eras(broker_epoch: bool) -> None:
    events = restarted_broker_requests("run", Knobs(broker_epoch=broker_epoch))
    checker = InvariantChecker()
    for event in copy.deepcopy(events):
        checker.step(event)
    assert checker.report.violations == []
    report = validate_events(events)
    assert report.ok, report.failure


def relabelled(events: list[Event], knobs: Knobs) -> list[Event]:
    """The same history, declared to come from a design with other knobs."""
    copied = copy.deepcopy(events)
    copied[0]["args"]["knobs"] = knobs.to_dict()
    return copied


@pytest.mark.parametrize("broker_epoch", [True, False])
def test_the_validator_tells_the_eras_apart_at_the_first_stale_request(broker_epoch: bool) -> None:
    """A history of one era, read as the other's, fails exactly where a request reaches a later registration
    of its recipient: the refusal is no step before 2.2, the application none since."""
    events = restarted_broker_requests("run", Knobs(broker_epoch=broker_epoch))
    report = validate_events(relabelled(events, Knobs(broker_epoch=not broker_epoch)))
    assert report.failure is not None
    assert report.failure.seq == to_earlier_registration(events)[0]["seq"]
