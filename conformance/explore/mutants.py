"""Mutation testing of the implementation: a catalogue of small, plausible bugs, each applied alone to a
fresh process (by recompiling one function from its patched source), and every oracle run against it
(`oracles`: the scenario files of the checkout's tests/scenarios/, seeded simulator runs, a replay of the
unmutated implementation's runs, and a bounded campaign of the state machines with safe knobs). A mutant is
killed when any oracle fails; the result says which oracles did, so a bug caught only by a golden file's
expected output shows apart from one a named invariant or property catches."""

from __future__ import annotations

import importlib
import inspect
import multiprocessing
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kcm.conformance.explore.oracles import NAMED, ORACLES, Suite, reference_traces, run_oracles
from kcm.conformance.scenario.language import CHECKOUT_SCENARIOS
from kcm.spec.trace.format import Event

RM, EL, PSM, CTL, CS, CC, DS = ("kcm.impl.replica_manager", "kcm.impl.election", "kcm.impl.partition_state_machine",
                                "kcm.impl.controller", "kcm.impl.controller_store", "kcm.impl.controller_context",
                                "kcm.impl.design")


@dataclass(frozen=True)
class Mutant:
    name: str
    module: str
    target: str  # "function" or "Class.method"
    old: str
    new: str
    idea: str
    # The whole mutated function, for a mutant made by rewriting its syntax tree
    # (kcm.conformance.explore.generated_mutants): then `old` and `new` only show the edit.
    source: str | None = None


def _m(name: str, module: str, target: str, old: str, new: str, idea: str) -> Mutant:
    return Mutant(name, module, target, old, new, idea)


CATALOGUE: Final[tuple[Mutant, ...]] = (
    # -- fencing: controller epochs, leader epochs
    _m("no-controller-epoch-check", RM, "ReplicaManager._accept_controller_epoch",
       "if self.design.refuses_controller_epoch(epoch, self.controller_epoch):", "if False:",
       "skip the controller-epoch check"),
    _m("controller-epoch-overwritten", RM, "ReplicaManager._accept_controller_epoch",
       "self.controller_epoch = max(self.controller_epoch, epoch)", "self.controller_epoch = epoch",
       "a broker forgets a newer controller epoch when an older request is let through"),
    _m("leader-epoch-ge", DS, "Design.refuses_leader_epoch", "epoch <= known", "epoch < known",
       "compare leader epochs with >= instead of >"),
    _m("no-leader-epoch-check", RM, "ReplicaManager._is_stale",
       "return self.design.refuses_leader_epoch(leader_epoch, replica.leader_epoch)", "return False",
       "apply every LeaderAndIsr whatever its leader epoch"),
    _m("stop-replica-stale-epoch", RM, "ReplicaManager._on_stop_replica",
       "accepted = self._accept_controller_epoch(request.controller_epoch, request.controller_id)",
       "accepted = self._accept_controller_epoch(request.controller_epoch, request.controller_id) or True",
       "accept StopReplica from a stale controller epoch"),
    _m("fetch-fence-lower-only", RM, "ReplicaManager._fence_error",
       "if fenced and current_leader_epoch != replica.leader_epoch:",
       "if fenced and current_leader_epoch < replica.leader_epoch:",
       "KIP-320 fence only refuses older epochs, not newer ones"),
    _m("follower-accepts-old-epoch-response", RM, "ReplicaManager._current_follower",
       "replica.role != FOLLOWER or replica.leader_epoch != leader_epoch", "replica.role != FOLLOWER",
       "a follower takes fetch replies meant for an earlier leader epoch"),
    # -- high watermark
    _m("hw-as-max", DS, "Design.high_watermark", "return min(own_end, min(isr_ends, default=own_end))",
       "return max(own_end, min(isr_ends, default=own_end))", "compute the HW as a max"),
    _m("hw-may-go-back", RM, "ReplicaManager._maybe_advance_hw", "if candidate > replica.hw:",
       "if candidate != replica.hw:", "the leader's HW may move backwards"),
    _m("hw-ignores-isr", RM, "ReplicaManager._maybe_advance_hw",
       "for r in replica.isr if r != self.broker_id", "for r in () if r != self.broker_id",
       "the leader commits without waiting for its ISR"),
    _m("follower-hw-uncapped", RM, "ReplicaManager._on_fetch_response",
       "replica.hw = min(response.high_watermark, len(replica.log))", "replica.hw = response.high_watermark",
       "a follower's HW may pass its log end"),
    _m("restart-hw-from-log", RM, "ReplicaManager.restart",
       "replica.hw = min(replica.hw_checkpoint, len(replica.log))", "replica.hw = len(replica.log)",
       "log recovery takes the log end as the HW instead of the checkpoint"),
    _m("truncate-keeps-hw", RM, "ReplicaManager._truncate", "replica.hw = min(replica.hw, len(replica.log))",
       "pass", "truncation leaves the HW above the log end"),
    # -- truncation and fetching
    _m("skip-truncation", RM, "ReplicaManager._truncate", "if offset < len(replica.log):", "if False:",
       "skip truncation"),
    _m("no-truncation-on-become-follower", RM, "ReplicaManager._become_follower",
       "replica.truncating = True", "replica.truncating = False",
       "a new follower never asks the leader where its epoch ends"),
    _m("undefined-epoch-keeps-log", RM, "ReplicaManager._on_offsets_for_leader_epoch_response",
       "offset = replica.hw", "offset = len(replica.log)",
       "an undefined epoch answer keeps the whole log instead of truncating to the HW"),
    _m("fetch-offset-unchecked", RM, "ReplicaManager._on_fetch_response",
       "if response.error or response.fetch_offset != len(replica.log):", "if response.error:",
       "a follower appends a reply for another offset (duplicated or reordered)"),
    _m("fetch-beyond-log-end", RM, "ReplicaManager._on_fetch", "request.fetch_offset > len(replica.log)",
       "request.fetch_offset > len(replica.log) + 1", "the leader serves a fetch past its log end"),
    _m("epoch-start-zero", RM, "ReplicaManager._become_leader", "replica.epoch_start_offset = len(replica.log)",
       "replica.epoch_start_offset = 0", "a new leader forgets where its epoch starts"),
    # -- ISR
    _m("always-caught-up", RM, "ReplicaManager._record_follower_position", "if offset >= len(replica.log):",
       "if True:", "every fetch counts as caught up, so laggards are never dropped from the ISR"),
    _m("isr-join-below-hw", DS, "Design.in_sync_for_expansion", "caught_up = offset >= leader_hw",
       "caught_up = offset >= 0", "a follower joins the ISR before reaching the HW"),
    _m("isr-join-before-epoch", DS, "Design.in_sync_for_expansion",
       "return caught_up and offset >= epoch_start", "return caught_up",
       "a follower joins the ISR before reaching the leader's epoch (the KIP-320 rule dropped)"),
    _m("shrink-keeps-laggards", RM, "ReplicaManager.shrink_isr", "if r not in laggards", "if r in laggards",
       "the ISR shrink keeps the laggards and drops the others"),
    _m("failed-broker-stays-in-isr", PSM, "PartitionStateMachine._decide",
       "isr = live_isr if leader in live_isr else (leader,)", "isr = current.isr",
       "leave a failed broker in the ISR"),
    _m("shutdown-broker-stays-in-isr", PSM, "PartitionStateMachine._decide",
       "isr = tuple(r for r in current.isr if r not in ctx.shutting_down)", "isr = current.isr",
       "a broker shutting down stays in the ISR"),
    _m("dead-brokers-in-new-isr", PSM, "PartitionStateMachine._initialize",
       "isr = tuple(r for r in replicas if r in live)", "isr = tuple(replicas)",
       "a new partition's ISR includes brokers that are down"),
    # -- elections
    _m("always-unclean", EL, "offline_partition_leader", "lambda r: r in live and r in isr)",
       "lambda r: r in live)", "offline election ignores the ISR"),
    _m("unclean-knob-ignored", EL, "offline_partition_leader", "if clean is None and unclean_enabled:",
       "if clean is None:", "unclean election whatever the knob says"),
    _m("isr-order-election", EL, "offline_partition_leader",
       "clean = _first(assignment, lambda r: r in live and r in isr)",
       "clean = _first(sorted(isr, reverse=True), lambda r: r in live and r in isr)",
       "scan candidates in ISR order instead of assignment order"),
    _m("reassign-leader-outside-isr", EL, "reassign_partition_leader", "lambda r: r in live and r in isr",
       "lambda r: r in live", "reassignment elects a leader outside the ISR"),
    _m("preferred-outside-isr", EL, "preferred_replica_partition_leader",
       "assignment[0] in live and assignment[0] in isr", "assignment[0] in live",
       "preferred election of a replica outside the ISR"),
    _m("shutdown-elects-leaving-broker", EL, "controlled_shutdown_partition_leader",
       "r in live and r in isr and r not in shutting_down", "r in live and r in isr",
       "controlled shutdown may elect the broker that is leaving"),
    # -- the controller
    _m("controller-epoch-not-bumped", CTL, "Controller._try_elect", "epoch = int(data) + 1", "epoch = int(data)",
       "a new controller keeps its predecessor's epoch"),
    _m("leader-epoch-not-bumped", CC, "LeaderIsr.successor", "self.leader_epoch + 1", "self.leader_epoch",
       "a new leadership decision keeps the old leader epoch"),
    _m("no-store-fencing", CS, "ControllerStore.write",
       "fenced = self.design.fences_controller_writes()", "fenced = False",
       "a deposed controller's store writes are not fenced by the epoch node's version"),
    _m("broker-failure-no-election", CTL, "Controller._on_broker_failure",
       "psm.handle(leaderless, P.OfflinePartition)", "psm.handle([], P.OfflinePartition)",
       "partitions led by a failed broker are not moved offline and re-elected"),
    _m("reassign-without-isr-wait", CTL, "Controller._reassign", "if not set(target) <= set(leadership.isr):",
       "if False:", "write the final assignment before the new replicas have joined the ISR"),
    # -- progress: bugs that break no safety invariant, only availability (docs/invariants.md, progress)
    _m("hw-over-assignment", RM, "ReplicaManager._maybe_advance_hw",
       "for r in replica.isr if r != self.broker_id", "for r in replica.replicas if r != self.broker_id",
       "the HW waits for every assigned replica, not the ISR: a dead replica outside the ISR freezes commits"),
    _m("shutdown-broker-electable", PSM, "PartitionStateMachine._decide", "live = ctx.live_not_shutting_down()",
       "live = set(ctx.live_brokers)",
       "elections count a broker in controlled shutdown as live: leadership lands on the broker leaving"),
    _m("shutdown-leaves-broker-untold", PSM, "PartitionStateMachine._decide",
       "return Decision(leader, isr, frozenset(r for r in assignment if r in everyone))",
       "return Decision(leader, isr, frozenset(r for r in assignment if r in everyone and r != current.leader))",
       "a controlled shutdown's new leadership is not sent to the leaving broker: it stops still acting as "
       "leader of the old epoch"),
    _m("controller-isr-write-unconditional", CS, "ControllerStore.update_leader_isr",
       "SetData(zk_paths.partition_state_path(partition), data, new.version)",
       "SetData(zk_paths.partition_state_path(partition), data)",
       "the controller's leader/ISR write ignores the node's version: a leader's concurrent ISR change is lost"),
    _m("reassign-retires-leader-unelected", CTL, "Controller._reassign",
       'psm.handle([partition], P.OnlinePartition, "reassign")',
       "rsm.handle([(partition, leadership.leader)], R.OfflineReplica)",
       "a reassignment retires the old leader instead of electing one from the target: the partition stays "
       "leaderless until some later election"),
    # -- the implementation's valid-previous-state tables (the oracles judge by the model's, kcm.spec.states)
    _m("partition-table-drops-offline-to-online", "kcm.impl.states", "valid_partition_transition",
       "in _VALID_PARTITION_PAIRS", 'in _VALID_PARTITION_PAIRS - {("OfflinePartition", "OnlinePartition")}',
       "the partition table drops OfflinePartition -> OnlinePartition: a partition whose leader failed is "
       "never elected again"),
    _m("replica-table-allows-deleted-to-ineligible", "kcm.impl.states", "valid_replica_transition",
       "in _VALID_REPLICA_PAIRS",
       'in _VALID_REPLICA_PAIRS | {("ReplicaDeletionSuccessful", "ReplicaDeletionIneligible")}',
       "the replica table lets a deleted replica (ReplicaDeletionSuccessful) become ReplicaDeletionIneligible"),
    _m("replica-table-drops-ineligible-to-offline", "kcm.impl.states", "valid_replica_transition",
       "in _VALID_REPLICA_PAIRS", 'in _VALID_REPLICA_PAIRS - {("ReplicaDeletionIneligible", "OfflineReplica")}',
       "the replica table drops ReplicaDeletionIneligible -> OfflineReplica: a deletion that failed is never "
       "retried"),
)


# The bugs that break no safety invariant, only progress: each must be killed by a named oracle.
PROGRESS_MUTANTS: Final = ("hw-over-assignment", "shutdown-broker-electable", "shutdown-leaves-broker-untold",
                           "controller-isr-write-unconditional", "reassign-retires-leader-unelected")


@dataclass
class MutantResult:
    name: str
    kills: dict[str, str]  # oracle (kcm.conformance.explore.oracles.ORACLES) -> its first evidence
    seconds: float
    cpu_seconds: float  # of its own process: what the run costs on an idle core

    @property
    def killed(self) -> bool:
        return bool(self.kills)

    @property
    def named(self) -> bool:
        """Killed by a named invariant or progress property, not only by outputs, steps or replay."""
        return any(oracle in NAMED for oracle in self.kills)

    @property
    def by(self) -> str:
        """The strongest oracle that killed it (in the order of ORACLES), with its evidence; "" if none."""
        return next((f"{oracle}: {self.kills[oracle]}" for oracle in ORACLES if oracle in self.kills), "")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "killed": self.killed, "named": self.named, "by": self.by,
                "oracles": {oracle: self.kills[oracle] for oracle in ORACLES if oracle in self.kills},
                "seconds": round(self.seconds, 2), "cpu_seconds": round(self.cpu_seconds, 2)}


class MutationError(ValueError):
    """A mutant whose original text is no longer in its function (the implementation moved on)."""


def _resolve(mutant: Mutant) -> tuple[Any, str, Callable[..., Any]]:
    module = importlib.import_module(mutant.module)
    owner: Any = module
    *path, name = mutant.target.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name, getattr(owner, name)


def mutated_source(mutant: Mutant) -> str:
    if mutant.source is not None:
        return mutant.source
    _, _, function = _resolve(mutant)
    source = textwrap.dedent(inspect.getsource(function))
    if source.count(mutant.old) != 1:
        raise MutationError(f"mutant {mutant.name}: {mutant.old!r} occurs {source.count(mutant.old)} times in "
                            f"{mutant.module}.{mutant.target}, expected once")
    return source.replace(mutant.old, mutant.new)


def apply(mutant: Mutant) -> None:
    """Recompiles the target function from its patched source, in its module's namespace (this process only)."""
    owner, name, original = _resolve(mutant)
    module = importlib.import_module(mutant.module)
    namespace: dict[str, Any] = {}
    code = compile(mutated_source(mutant), f"<mutant {mutant.name}>", "exec")
    exec(code, vars(module), namespace)  # the implementation's own source, patched
    replacement = namespace[name]
    setattr(owner, name, replacement)
    # Functions imported by name elsewhere keep the original: point those names at the mutant too.
    for loaded in list(sys.modules.values()):
        if getattr(loaded, "__name__", "").startswith("kcm.") and getattr(loaded, name, None) is original:
            setattr(loaded, name, replacement)


# -- the suite ----------------------------------------------------------------------------------------------

# The unmutated implementation's traces for the replay oracle: written in the parent, inherited by each fork.
_REFERENCES: list[list[Event]] = []


def evaluate(mutant: Mutant, suite: Suite) -> MutantResult:
    """Applies the mutant in this process and runs every oracle; meant for a process of its own."""
    started, cpu = time.perf_counter(), time.process_time()
    apply(mutant)
    kills = run_oracles(suite, _REFERENCES, CHECKOUT_SCENARIOS)
    return MutantResult(mutant.name, kills, time.perf_counter() - started, time.process_time() - cpu)


def _evaluate_args(args: tuple[Mutant, Suite]) -> MutantResult:
    return evaluate(*args)


def run_mutants(mutants: tuple[Mutant, ...] = CATALOGUE, processes: int = 2, suite: Suite | None = None,
                on_result: Callable[[MutantResult], None] | None = None) -> list[MutantResult]:
    """Every mutant in a fresh process (forked, one task per process, so no patch outlives its mutant)."""
    for mutant in mutants:
        mutated_source(mutant)  # fails fast on a mutant that no longer applies
    suite = suite or Suite()
    _REFERENCES[:] = reference_traces(suite)
    context = multiprocessing.get_context("fork")
    results: list[MutantResult] = []
    with context.Pool(processes, maxtasksperchild=1) as pool:
        for result in pool.imap_unordered(_evaluate_args, [(m, suite) for m in mutants]):
            results.append(result)
            if on_result is not None:
                on_result(result)
    order = {m.name: i for i, m in enumerate(mutants)}
    return sorted(results, key=lambda r: order[r.name])


def kill_counts(results: list[MutantResult]) -> dict[str, int]:
    """Per oracle, how many mutants it killed (a mutant killed by several counts for each)."""
    return {oracle: sum(oracle in r.kills for r in results) for oracle in ORACLES}
