"""The design points: the places where designs of this controller differ, named once, each with its reading in
every engine.

A design chooses a rule at each point. The TLA+ core (spec/KafkaReplication.tla) reads a point as hook operators
(the era hooks, bound per truncation rule by spec/tlc/config.py) or as a constant the core branches on; the
implementation's core calls the point's methods of `kcm.impl.design.Design`; the Z3 encoding (spec/z3/actions.py)
reads the knob that selects a built-in rule. An engine's reading that is a knob, not a hook, cannot take a rule
of one's own: `z3` and `tla` say which reading each point has today, and a point an engine cannot read at all
says `None` there (its verdict for a design that changes the point is `unsupported`, never the default's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kcm.spec.vocabulary import CORE_HOOKS, ERA_HOOKS


@dataclass(frozen=True)
class DesignPoint:
    name: str
    meaning: str
    knobs: tuple[str, ...]  # the knobs (kcm.spec.vocabulary.Knobs) that choose among the built-in rules
    tla: tuple[str, ...]  # the hook operators of the core or its era; without tla_hooks, the action or operator
    python: tuple[str, ...]  # methods of kcm.impl.design.Design
    z3: str | None  # how the Z3 encoding reads the point; None: it does not
    tla_hooks: bool = False  # the TLA+ reading is hook operators a design module may define

    @property
    def unsupported_by_z3(self) -> bool:
        return self.z3 is None


DESIGN_POINTS: Final[tuple[DesignPoint, ...]] = (
    DesignPoint(
        "follower-truncation",
        "how a new follower finds where its log and its leader's part: its own HW at once, or the leader's answer "
        "to OffsetsForLeaderEpoch, and what the answer is (the four eras: hw, kip101, kip279, kip320)",
        ("truncation",),
        ("TruncateOnBecomeFollower", "EpochEndAnswer", "TruncationOffset"),
        ("truncate_on_become_follower", "epoch_end_answer", "truncation_offset"),
        "knob truncation", tla_hooks=True),
    DesignPoint(
        "leader-election-on-failure",
        "the new leader of a partition whose leader failed: the first live ISR member in assignment order, or "
        "with unclean election the first live replica",
        ("unclean_election",),
        ("OfflineLeader",),
        ("offline_partition_leader",),
        "knob unclean_election", tla_hooks=True),
    DesignPoint(
        "isr-expansion",
        "when a follower rejoins the ISR: at the leader's HW, and from KIP-320 on also at the leader's epoch start",
        ("truncation",),
        ("InSyncForExpansion",),
        ("in_sync_for_expansion",),
        "knob truncation", tla_hooks=True),
    DesignPoint(
        "isr-shrink",
        "when a leader drops a follower that has not caught up for too long (TLA+ abstracts time: any ISR "
        "follower may lag)",
        (),
        ("IsrShrink",),
        ("lagging",),
        None),
    DesignPoint(
        "hw-advancement",
        "the HW a leader advances to: the lowest log end among it and its ISR",
        (),
        ("AdvancedHw",),
        ("high_watermark",),
        None),
    DesignPoint(
        "hw-exposure",
        "whether a new leader exposes its HW before the HW reached its epoch start (the KAFKA-2334 fix)",
        ("truncation",),
        ("ExposesHw",),
        (),
        "knob truncation", tla_hooks=True),
    DesignPoint(
        "leader-epoch-fencing",
        "KIP-320: Fetch and OffsetsForLeaderEpoch carry the follower's leader epoch, refused by a leader in "
        "another epoch",
        ("truncation",),
        ("FenceCurrentLeaderEpoch",),
        ("fence_current_leader_epoch",),
        "knob truncation", tla_hooks=True),
    DesignPoint(
        "controller-epoch-fencing",
        "a broker refuses a request of an older controller epoch, and a controller's store writes check the "
        "controller epoch node",
        ("controller_epoch_fencing",),
        ("RefusesControllerEpoch", "FencesControllerWrites"),
        ("refuses_controller_epoch", "fences_controller_writes"),
        "knob controller_epoch_fencing", tla_hooks=True),
    DesignPoint(
        "leader-epoch-check",
        "a broker refuses a LeaderAndIsr entry whose leader epoch is not newer than its own",
        ("leader_epoch_check",),
        ("RefusesLeaderEpoch",),
        ("refuses_leader_epoch",),
        "knob leader_epoch_check", tla_hooks=True),
    DesignPoint(
        "broker-epoch-fencing",
        "KIP-380: controller requests carry the broker epoch, a broker refuses one addressed to an earlier "
        "registration, and the controller sees a bounced broker",
        ("broker_epoch",),
        ("BrokerEpochFencing",),
        ("broker_epoch_fencing",),
        "knob broker_epoch", tla_hooks=True),
    DesignPoint(
        "min-isr",
        "a produce with acks=all is refused while the ISR is smaller than min_isr",
        ("min_isr",),
        ("AcceptsWrite",),
        ("accepts_write",),
        "knob min_isr", tla_hooks=True),
)

# The hooks are the TLA+ reading of the points that have hooks: every one belongs to exactly one point.
assert sorted(h for p in DESIGN_POINTS if p.tla_hooks for h in p.tla) == sorted((*ERA_HOOKS, *CORE_HOOKS))


def design_point(name: str) -> DesignPoint:
    for point in DESIGN_POINTS:
        if point.name == name:
            return point
    raise KeyError(f"unknown design point {name!r} (known: {', '.join(p.name for p in DESIGN_POINTS)})")
