"""The invariant checker: reads a trace (format v2) event by event, keeps the model state, and checks the
eleven invariants of kcm on what each event changed. Exact definitions: docs/invariants.md.

Checking is incremental: an event's delta names the partitions and replicas it touched, and only those
are checked, so the cost of a step does not grow with the cluster. History the invariants need (leaders
per epoch, committed records, the highest HW exposed) is kept here, not in the trace.

Comparing logs is the one cost that grows with the run (a log holds up to a hundred records), so the
checker also remembers, per pair of logs of a partition and per log against the committed records, a
prefix length already found equal. A log that changes keeps those lengths only while its new value still
starts with the verified part of its old one, so each record is compared about once, not at every check.
The outcome of a partition's agreement check is reused while its logs and HWs move without taking any pair
past its verified prefix (a leader appending and raising its HW, most often). Both rely on leaf values being
immutable once in a delta, as `apply_delta` already requires.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from kcm.conformance.check.progress import WATCHED, ProgressMonitor
from kcm.spec.states import VALID_PARTITION_TRANSITIONS, VALID_REPLICA_TRANSITIONS
from kcm.spec.trace.format import Event, empty_state, merge_variable
from kcm.spec.verdicts import UNOBSERVED, VIOLATED, held
from kcm.spec.vocabulary import HW_ACROSS_LEADERS, HW_PER_LEADER, INVARIANTS, NO_LEADER, PROPERTIES, VARIABLES

# Which variables each invariant reads: with a partial trace, an invariant is checked only if the trace
# observes all of them.
READS: Final[dict[str, tuple[str, ...]]] = {
    "OneLeaderPerEpoch": ("leader", "leader_epoch"),
    "IsrSubsetOfReplicas": ("isr", "assignment"),
    "LeaderInIsr": ("leader", "isr"),
    "HighWatermarkMonotonic": ("role", "local_leader_epoch", "hw"),
    "HighWatermarkWithinLog": ("log", "hw"),
    "NoCommittedDataLoss": ("role", "log", "hw"),
    "ReplicaLogsAgree": ("log", "hw"),
    "ControllerEpochMonotonic": ("controller_epoch",),
    "LeaderEpochMonotonic": ("leader_epoch",),
    "StaleControllerFenced": ("broker_controller_epoch",),
    "ValidPartitionTransitions": ("partition_state",),
    "ValidReplicaTransitions": ("replica_state",),
}
CONTEXT_LOAD_ACTIONS: Final = frozenset({"ControllerElect", "BrokerReregister"})
CONTROLLER_REQUESTS: Final = frozenset({"LeaderAndIsr", "StopReplica", "UpdateMetadata"})
STORE_PARTITION_VARS: Final = ("assignment", "leader", "leader_epoch", "isr")
REPLICA_VARS: Final = ("role", "local_leader_epoch", "log", "hw", "epoch_start_offset")
MAX_VIOLATIONS: Final = 1000
EPOCH_VARS: Final = frozenset({"controller_epoch", "broker_controller_epoch", "leader_epoch", "local_leader_epoch"})

# How the checker merges each variable of a delta (see `_apply`): by `merge_variable` (a global value or
# the replica states, three deep), a map (a store partition variable among them), or a map of maps per
# broker (the replica variables among them, the HW and the log also void what was verified of them).
_BY_TRACE, _MAP, _STORE, _BROKER_MAP, _REPLICA, _HW, _LOG = range(7)
_MERGE: Final[dict[str, int]] = {
    name: _STORE if name in STORE_PARTITION_VARS else _LOG if name == "log" else _HW if name == "hw" else
    _REPLICA if name in REPLICA_VARS else _MAP if depth == 1 else _BROKER_MAP if depth == 2 else _BY_TRACE
    for name, depth in VARIABLES.items()
}

# Each state machine's invariant, its state when absent, and the model's table as (from, to) pairs of
# state names: the implementation is judged by the model's tables, never by its own.
_PARTITION_MACHINE: Final = ("ValidPartitionTransitions", "NonExistentPartition", VALID_PARTITION_TRANSITIONS)
_REPLICA_MACHINE: Final = ("ValidReplicaTransitions", "NonExistentReplica", VALID_REPLICA_TRANSITIONS)

# A state machine of a controller: a partition's, named by the partition, or a replica's, by (partition, replica).
_Machine = str | tuple[str, str]

# The default of lookups into maps that may lack a broker or partition; never written to.
_NONE: Final[dict[str, Any]] = {}


@dataclass(slots=True)
class _Agreement:
    """A partition's last check of ReplicaLogsAgree: pairs checked, a message per disagreement, each log's
    limit (its HW capped by its length) then, and the brokers whose HW or log has moved since."""

    pairs: int
    messages: list[str]
    limits: dict[str, int]
    moved: set[str] = field(default_factory=set)


def per_invariant(checks: Counter[str]) -> Counter[str]:
    """Checks per invariant or property, its readings (`HighWatermarkMonotonic/AcrossLeaders`) together."""
    total: Counter[str] = Counter()
    for key, count in checks.items():
        total[key.split("/")[0]] += count
    return total


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    seq: int
    message: str


@dataclass
class CheckReport:
    events: int = 0
    checks: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    observed: set[str] = field(default_factory=set)

    def verdict(self, invariant: str) -> str:
        """An invariant's or a progress property's: it holds once checked without a violation (a property:
        judged at a calm phase's deadline), and stays unobserved while it was never checked or the trace
        lacks a variable it reads."""
        if any(v.invariant.split("/")[0] == invariant for v in self.violations):
            return VIOLATED
        if invariant not in PROPERTIES and not all(var in self.observed for var in READS[invariant]):
            return UNOBSERVED
        return held(per_invariant(self.checks)[invariant])

    def verdicts(self) -> dict[str, str]:
        return {name: self.verdict(name) for name in (*INVARIANTS, *PROPERTIES)}

    @property
    def ok(self) -> bool:
        return not self.violations


class InvariantChecker:
    def __init__(self, truncation: str = "kip320") -> None:
        self.state: dict[str, Any] = empty_state()
        self.truncation = truncation
        self._report = CheckReport()
        # Checks counted since the report was last read: a Counter's items are set through Python-level
        # slots (it defines __delitem__), several times slower than a plain dict's.
        self._counts: dict[str, int] = {}
        self.seq = -1
        self._event: Event | None = None
        # actor -> (kind, id): a trace has a handful of actors, each named in thousands of events
        self._actors: dict[str, tuple[str, str]] = {}
        self._reset_history()
        self._reset_state()
        self.progress = ProgressMonitor(lambda: self.state, self._report.observed, self._count)

    def _reset_history(self) -> None:
        """A new run starts (its Init event): nothing an earlier run did is history for it.

        Besides what the invariants need, the history keeps what their explanations name, written only when
        it changes: the step of each first claim of an epoch, of each leader's HW, of the highest HW exposed
        and of each extension of the committed records, and the controller elected in each epoch."""
        # partition -> epoch -> (first leader named, step, how it claimed the epoch)
        self.leader_of_epoch: dict[str, dict[int, tuple[Any, int, str]]] = {}
        # (broker, partition) -> (leader epoch, HW, the step it reached that HW)
        self.leader_hw: dict[tuple[str, str], tuple[int, int, int]] = {}
        self.exposed_hw: dict[str, int] = {}
        # partition -> (leader, leader epoch, step) that first exposed the highest HW
        self._exposed_by: dict[str, tuple[str, Any, int]] = {}
        self.committed: dict[str, list[Any]] = {}
        # partition -> (end offset, step, leader) per extension of its committed records, in offset order
        self._commits: dict[str, list[tuple[int, int, str]]] = {}
        self._elected: dict[Any, Any] = {}  # controller epoch -> the controller elected in it
        # partition -> broker -> a prefix length on which the log is known to hold the committed records
        self._holds: dict[str, dict[str, int]] = {}

    @property
    def report(self) -> CheckReport:
        """The report so far, with every check counted. Counts reach it here, when it is read: a reference
        kept across steps shows the checks as of its last read through this property."""
        checks = self._report.checks
        for invariant, count in self._counts.items():
            checks[invariant] += count
        self._counts.clear()
        return self._report

    def _count(self, invariant: str, checks: int = 1) -> None:
        counts = self._counts
        counts[invariant] = counts.get(invariant, 0) + checks

    def _reset_state(self) -> None:
        """The state starts empty (a `full` event), and with it what the checker derived from it."""
        state = self.state = empty_state()
        # The state's maps of partitions and brokers, typed so that compiled lookups into them are native.
        # `_apply` merges every delta into them in place, so they stay the state's own.
        self._assignment: dict[str, Any] = state["assignment"]
        self._leader: dict[str, Any] = state["leader"]
        self._leader_epoch: dict[str, Any] = state["leader_epoch"]
        self._isr: dict[str, Any] = state["isr"]
        self._acting: dict[str, Any] = state["acting_controller_epoch"]
        self._broker_epoch: dict[str, Any] = state["broker_controller_epoch"]
        self._partition_states: dict[str, dict[str, Any]] = state["partition_state"]
        self._replica_states: dict[str, dict[str, dict[str, Any]]] = state["replica_state"]
        self._role: dict[str, dict[str, Any]] = state["role"]
        self._local_epoch: dict[str, dict[str, Any]] = state["local_leader_epoch"]
        self._hw: dict[str, dict[str, Any]] = state["hw"]
        self._epoch_start: dict[str, dict[str, Any]] = state["epoch_start_offset"]
        # partition -> broker -> log: the logs of each partition, brokers in sorted order
        self._logs: dict[str, dict[str, list[Any]]] = {}
        # partition -> broker -> broker -> a prefix length on which the two logs are known to agree
        self._agreed: dict[str, dict[str, dict[str, int]]] = {}
        # partition -> (its ISR, the ISR's brokers as sorted ids): the ISR changes far less often than
        # the committed records are checked against its members
        self._isr_names: dict[str, tuple[Any, list[str]]] = {}
        # partition -> its last agreement check, kept while every pair stays verified below both HWs
        self._agreement: dict[str, _Agreement] = {}
        self._holds = {}

    # -- driving -------------------------------------------------------------------------------------

    def check_all(self, events: Iterable[Event]) -> CheckReport:
        for event in events:
            self.step(event)
        return self.report

    def step(self, event: Event) -> list[Violation]:
        self.seq = event["seq"]
        self._event = event  # named by the explanations of a violation
        report = self._report
        report.events += 1
        delta: dict[str, Any] = event["state"]
        args: dict[str, Any] = event["args"]
        action = event["action"]
        found: list[Violation] = []
        if action == "Init":
            self.truncation = args.get("knobs", {}).get("truncation", self.truncation)
            self._reset_history()
        if event.get("full"):
            self._reset_state()
        if action in WATCHED:
            for name, message in self.progress.observe(event, self.seq):
                self._violate(found, name, message)
        elif self.progress.reassigning and "writes" in args:
            self.progress.note_writes(args["writes"])
        transitions = args.get("transitions")
        refused = args.get("invalid_transitions")
        if refused:
            self._refusal_checks(refused, found)
        actor = event["actor"]
        names = self._actors.get(actor)
        if names is None:
            kind, _, ident = actor.partition(":")
            names = self._actors[actor] = (kind, ident)
        actor_kind, actor_id = names
        request = action in CONTROLLER_REQUESTS and "controller_epoch" in args
        # The pre-step values the pair-of-states checks compare against, read before the delta lands.
        state = self.state
        seen = self._broker_epoch.get(actor_id) if request else None
        if not (delta or transitions):
            # Two thirds of the events change nothing; only the fencing of their actor can break.
            if request:
                self._request_fencing_check(event, actor_id, seen, found)
            if actor_kind == "controller":
                self._count("StaleControllerFenced")
            if found:
                self._record(found)
            return found
        controller_epoch = state["controller_epoch"]
        acting = self._acting.get(actor_id, 0) if actor_kind == "controller" else 0
        epochs = None if EPOCH_VARS.isdisjoint(delta) else self._epochs_before(delta)
        machines = bool(transitions) or "partition_state" in delta or "replica_state" in delta
        chains = self._chains(transitions or (), actor_id) if machines else None
        store_partitions, replicas, partitions = self._apply(delta)
        report.observed.update(delta)
        if store_partitions:
            self._store_checks(store_partitions, delta, found)
        if replicas:
            self._replica_checks(replicas, found)
        for p in sorted(partitions):
            self._data_checks(p, found)
        if epochs is not None:
            self._epoch_checks(delta, controller_epoch, epochs, found)
        if "controller" in delta:
            self._election_check(controller_epoch, found)
        if request:
            self._request_fencing_check(event, actor_id, seen, found)
        if actor_kind == "controller":
            self._count("StaleControllerFenced")
            if store_partitions and acting < controller_epoch:
                written = sorted(name for name in STORE_PARTITION_VARS if name in delta)
                self._violate(found, "StaleControllerFenced",
                              f"deposed controller {actor_id} (acting in controller epoch {acting}) wrote "
                              f"{', '.join(written)} of {', '.join(sorted(store_partitions))} in {action} while "
                              f"controller epoch {controller_epoch}{self._elected_in(controller_epoch)} is "
                              f"current: its store write was applied")
        if chains is not None:
            self._transition_checks(action, delta, chains, actor_id, found)
        if found:
            self._record(found)
        return found

    def _record(self, found: list[Violation]) -> None:
        violations = self._report.violations
        violations.extend(found[: MAX_VIOLATIONS - len(violations)])

    def _apply(self, delta: dict[str, Any]) -> tuple[set[str], set[tuple[str, str]], set[str]]:
        """Merge the delta into the state (as `apply_delta`) and return the partitions of the store and the
        replicas (broker, partition) it touched, and the partitions of both.

        Maps are merged here rather than by `apply_delta`, so that one walk over the delta both merges it
        and collects what it touched, without a call per variable and broker.
        """
        state = self.state
        partitions: set[str] = set()
        replicas: set[tuple[str, str]] = set()
        touched: set[str] = set()
        for name, value in delta.items():
            merge = _MERGE[name]
            if merge == _BY_TRACE:
                merge_variable(state, name, value)
            elif merge < _BROKER_MAP:
                # The state's maps are the checker's own, dicts all: typed, their compiled lookups are native.
                target: dict[str, Any] = state[name]
                for key, v in value.items():
                    if v is None:
                        target.pop(key, None)
                    else:
                        target[key] = v
                if merge == _STORE:
                    partitions.update(value)
                    touched.update(value)
            else:
                brokers: dict[str, dict[str, Any]] = state[name]
                for b, inner in value.items():
                    into = brokers.get(b)
                    if into is None:
                        into = brokers[b] = {}
                    for p, v in inner.items():
                        if merge >= _REPLICA:
                            replicas.add((b, p))
                            touched.add(p)
                            if merge == _LOG:
                                self._log_changed(b, p, into.get(p), v)
                            if merge != _REPLICA:
                                memo = self._agreement.get(p)
                                if memo is not None:
                                    memo.moved.add(b)
                        if v is None:
                            into.pop(p, None)
                        else:
                            into[p] = v
        return partitions, replicas, touched

    def _log_changed(self, b: str, p: str, old: list[Any] | None, new: list[Any] | None) -> None:
        """Index b's new log of p, and keep its verified prefixes only if the new log starts with their
        longest one."""
        logs = self._logs.get(p)
        if new is None:
            if logs:
                logs.pop(b, None)
            self._agreement.pop(p, None)  # one pair fewer
        elif logs is None:
            self._logs[p] = {b: new}
        elif b in logs:
            logs[b] = new
        else:
            logs[b] = new
            self._logs[p] = dict(sorted(logs.items()))
            self._agreement.pop(p, None)  # pairs more
        if old is not None and new is not None and new[: len(old)] == old:
            return  # an append, the most frequent change, keeps every verified prefix
        agreed = self._agreed.get(p)
        row = agreed.get(b) if agreed else None
        holds = self._holds.get(p)
        verified = max(row.values(), default=0) if row else 0
        if holds:
            verified = max(verified, holds.get(b, 0))
        if not verified or (old is not None and new is not None and new[:verified] == old[:verified]):
            return
        if agreed and row:
            del agreed[b]
            for other in row:
                agreed[other].pop(b, None)
            self._agreement.pop(p, None)
        if holds:
            holds.pop(b, None)

    def _epochs_before(self, delta: dict[str, Any]) -> dict[str, Any]:
        """The pre-step epochs of the brokers, partitions and replicas the delta sets."""
        pre: dict[str, Any] = {}
        if "broker_controller_epoch" in delta:
            seen = self._broker_epoch
            pre["broker_controller_epoch"] = {b: seen.get(b) for b in delta["broker_controller_epoch"]}
        if "leader_epoch" in delta:
            epochs = self._leader_epoch
            pre["leader_epoch"] = {p: epochs.get(p) for p in delta["leader_epoch"]}
        if "local_leader_epoch" in delta:
            local = self._local_epoch
            pre["local_leader_epoch"] = {
                (b, p): local.get(b, _NONE).get(p) for b, ps in delta["local_leader_epoch"].items() for p in ps
            }
        return pre

    def _chains(self, transitions: Iterable[list[Any]], actor_id: str) -> dict[_Machine, list[Any]]:
        """The recorded transitions per partition or replica: its pre-step state, then (from, to) pairs."""
        partition_states = self._partition_states.get(actor_id, _NONE)
        replica_states = self._replica_states.get(actor_id, _NONE)
        chains: dict[_Machine, list[Any]] = {}
        for entry in transitions:
            kind, partition, *rest = entry
            if kind == "partition":
                src, dst = rest
                chain = chains.get(partition)
                if chain is None:
                    chain = chains[partition] = [partition_states.get(partition)]
            else:
                replica = rest[0]
                key = (partition, replica)
                src, dst = rest[1], rest[2]
                chain = chains.get(key)
                if chain is None:
                    chain = chains[key] = [replica_states.get(partition, _NONE).get(replica)]
            chain.append((src, dst))
        return chains

    def _violate(self, found: list[Violation], invariant: str, message: str) -> None:
        found.append(Violation(invariant, self.seq, message))

    # -- what explanations name (computed only for a violation) ------------------------------------------

    def _doer(self) -> str:
        """The step being checked as an explanation names it: its action and actor."""
        event = self._event
        return "?" if event is None else f"{event['action']} by {event['actor']}"

    def _elected_in(self, epoch: Any) -> str:
        """` of controller 2` when the trace showed which controller was elected in that controller epoch."""
        controller = self._elected.get(epoch)
        return "" if controller is None else f" of controller {controller}"

    def _exposer(self, p: str) -> str:
        by = self._exposed_by.get(p)
        return "exposed before" if by is None else f"leader {by[0]} exposed in leader epoch {by[1]} at step {by[2]}"

    def _commit_story(self, p: str, offset: int) -> str:
        """Where and when the committed record at `offset` of p became committed (the step whose leader's HW
        passed it), and which logs hold it now."""
        record = self.committed[p][offset]
        when = next((f"committed at step {seq} when the HW of leader {b} passed offset {offset}"
                     for end, seq, b in self._commits.get(p, ()) if end > offset), "committed")
        holders = [b for b, log in self._logs.get(p, _NONE).items() if len(log) > offset and log[offset] == record]
        return f"{when}; now held by {'broker(s) ' + ', '.join(holders) if holders else 'no broker'}"

    # -- the store's partition state -----------------------------------------------------------------------

    def _store_checks(self, partitions: set[str], delta: dict[str, Any], found: list[Violation]) -> None:
        assignments, isrs, leaders, epochs = self._assignment, self._isr, self._leader, self._leader_epoch
        for p in sorted(partitions):
            assignment = assignments.get(p)
            isr = isrs.get(p)
            leader = leaders.get(p)
            epoch = epochs.get(p)
            if assignment is None and p in delta.get("assignment", _NONE):
                self._forget_partition(p)
            if isr is not None and assignment is not None:
                self._count("IsrSubsetOfReplicas")
                outside = sorted(set(isr) - set(assignment))
                if outside:
                    self._violate(found, "IsrSubsetOfReplicas",
                                  f"{p}: ISR {isr} of leader epoch {epoch} has broker(s) {outside} outside the "
                                  f"assignment {assignment}")
            if leader is not None and isr is not None:
                self._count("LeaderInIsr")
                if leader != NO_LEADER and leader not in isr:
                    self._violate(found, "LeaderInIsr",
                                  f"{p}: leader {leader} of leader epoch {epoch} is not in the ISR {isr}")
            if leader is not None and epoch is not None and leader != NO_LEADER:
                self._claim(p, epoch, leader, found, "named leader in the store")

    def _claim(self, partition: str, epoch: int, broker: Any, found: list[Violation], how: str) -> None:
        self._count("OneLeaderPerEpoch")
        leaders = self.leader_of_epoch.get(partition)
        if leaders is None:
            self.leader_of_epoch[partition] = {epoch: (broker, self.seq, how)}
            return
        first = leaders.get(epoch)
        if first is None:
            leaders[epoch] = (broker, self.seq, how)
        elif first[0] != broker:
            self._violate(found, "OneLeaderPerEpoch",
                          f"{partition}: two leaders in leader epoch {epoch}: broker {first[0]} ({first[2]} "
                          f"since step {first[1]}) and broker {broker} ({how})")

    def _forget_partition(self, partition: str) -> None:
        """A deleted partition's history ends; a topic created again under the name starts afresh."""
        self.leader_of_epoch.pop(partition, None)
        self.exposed_hw.pop(partition, None)
        self._exposed_by.pop(partition, None)
        self.committed.pop(partition, None)
        self._commits.pop(partition, None)
        self._holds.pop(partition, None)

    # -- each replica ------------------------------------------------------------------------------------

    def _replica_checks(self, replicas: set[tuple[str, str]], found: list[Violation]) -> None:
        roles, local_epochs, hws = self._role, self._local_epoch, self._hw
        leader_hw = self.leader_hw
        for key in sorted(replicas):
            b, p = key
            role = roles.get(b, _NONE).get(p)
            epoch = local_epochs.get(b, _NONE).get(p)
            hw = hws.get(b, _NONE).get(p)
            if hw is not None:
                self._hw_within_log(b, p, hw, found)
            if role == "leader" and epoch is not None and epoch >= 0:
                # A broker leading in an epoch claims it whether or not its HW is observed (a Kafka log
                # shows roles, seldom HWs), as LeaderClaims of KafkaReplication.tla does.
                self._claim(p, epoch, int(b), found, "acting as leader")
            if role != "leader" or epoch is None or hw is None:
                leader_hw.pop(key, None)
                continue
            self._count(HW_PER_LEADER)
            last = leader_hw.get(key)
            if last is not None and last[0] == epoch and hw < last[1]:
                self._violate(found, HW_PER_LEADER,
                              f"{p}: HW of leader {b} went back from {last[1]} (reached at step {last[2]}) to {hw} "
                              f"within leader epoch {epoch} ({self._doer()})")
            if last is None or last[1] != hw or last[0] != epoch:
                leader_hw[key] = (epoch, hw, self.seq)
            self._commit(p, b, hw, found)

    def _hw_within_log(self, b: str, p: str, hw: Any, found: list[Violation]) -> None:
        log = self._logs.get(p, _NONE).get(b)
        if log is None:
            return  # a partial trace that does not observe this log: nothing to judge
        self._count("HighWatermarkWithinLog")
        if hw > len(log):
            self._violate(found, "HighWatermarkWithinLog",
                          f"{p}: broker {b} holds HW {hw} past its log end {len(log)} ({self._doer()}): it would "
                          f"expose as committed offsets it does not hold")

    def _commit(self, p: str, b: str, hw: int, found: list[Violation]) -> None:
        """Records below a leader's HW are committed; the committed records of a partition form a prefix."""
        log = self._logs.get(p, _NONE).get(b) or []
        n = min(hw, len(log))
        if n < 0:
            n = max(len(log) + n, 0)  # a negative HW cuts from the end, as the slice it stands for
        committed = self.committed.get(p)
        if committed is None:
            committed = self.committed[p] = []
        c = len(committed)
        if n <= c:
            return
        holds = self._holds.get(p)
        if holds is None:
            holds = self._holds[p] = {}
        verified = holds.get(b, 0)
        commits = self._commits.get(p)
        if commits is None:
            commits = self._commits[p] = []
        if verified < c and log[verified:c] != committed[verified:]:
            offset = _first_difference(log[:n], committed)
            self._violate(found, "NoCommittedDataLoss",
                          f"{p}: leader {b} (leader epoch {self._local_epoch.get(b, _NONE).get(p)}) raised its HW "
                          f"to {hw} over a log that replaces committed record {_record(committed[offset])} at "
                          f"offset {offset} with {_record(log[offset])}; {self._commit_story(p, offset)}")
            holds.clear()  # the committed records change: what other logs were found to hold is void
            commits[:] = [commit for commit in commits if commit[0] <= offset]
        self.committed[p] = log[:n]
        holds[b] = n
        commits.append((n, self.seq, b))

    # -- logs and the HW across leaders ----------------------------------------------------------------

    def _data_checks(self, p: str, found: list[Violation]) -> None:
        """The HW exposed across leaders, the committed records and the agreement of the logs of p."""
        logs = self._logs.get(p, _NONE)
        leader = self._leader.get(p)
        current = None
        if leader is not None and leader != NO_LEADER:
            b = str(leader)
            epoch = self._leader_epoch.get(p)
            if self._role.get(b, _NONE).get(p) == "leader" and self._local_epoch.get(b, _NONE).get(p) == epoch:
                current = b  # it leads p in the store's current epoch and knows it
                hw = self._hw.get(b, _NONE).get(p)
                # KAFKA-2334 fix: a new leader withholds its HW until it reaches its epoch's start
                if hw is not None and not (
                    self.truncation == "kip320" and hw < self._epoch_start.get(b, _NONE).get(p, 0)
                ):
                    self._count(HW_ACROSS_LEADERS)
                    highest = self.exposed_hw.get(p, 0)
                    if hw < highest:
                        self._violate(found, HW_ACROSS_LEADERS,
                                      f"{p}: HW exposed by leader {b} (leader epoch {epoch}) went back to {hw}, "
                                      f"below the {highest} {self._exposer(p)}")
                    elif hw > highest:
                        self.exposed_hw[p] = hw
                        self._exposed_by[p] = (b, epoch, self.seq)
        committed = self.committed.get(p)
        if committed:
            self._committed_check(p, current, logs, committed, found)
        if len(logs) > 1:
            memo = self._agreement.get(p)
            if memo is None or (memo.moved and not self._still_agreed(p, logs, memo)):
                memo = self._agreement[p] = self._agreement_pairs(p, logs)
            else:
                self._count("ReplicaLogsAgree", memo.pairs)
            for message in memo.messages:
                self._violate(found, "ReplicaLogsAgree", message)

    def _committed_check(
        self, p: str, leader: str | None, logs: dict[str, list[Any]], committed: list[Any], found: list[Violation]
    ) -> None:
        isr = self._isr.get(p)
        names = self._isr_names.get(p)
        if names is None or names[0] is not isr:
            names = self._isr_names[p] = (isr, sorted({str(r) for r in isr or ()}))
        holders = names[1]
        if leader is not None and leader not in holders:
            holders = sorted([*holders, leader])
        holds = self._holds.get(p)
        if holds is None:
            holds = self._holds[p] = {}
        c = len(committed)
        checked = 0
        for b in holders:
            log = logs.get(b)
            if log is None:
                continue
            checked += 1
            verified = holds.get(b, 0)
            if verified >= c:
                continue
            if len(log) >= c and log[verified:c] == committed[verified:]:
                holds[b] = c
                continue
            offset = _first_difference(log, committed)
            lost = ("is missing from the log of broker " + b if offset >= len(log) else
                    f"is replaced by {_record(log[offset])} in the log of broker {b}")
            self._violate(found, "NoCommittedDataLoss",
                          f"{p}: committed record {_record(committed[offset])} at offset {offset} {lost}; "
                          f"{self._commit_story(p, offset)}")
        if checked:
            self._count("NoCommittedDataLoss", checked)

    def _still_agreed(self, p: str, logs: dict[str, list[Any]], memo: _Agreement) -> bool:
        """Whether the last agreement check of p still stands after its brokers in `memo.moved` changed a
        HW or extended a log: it found no disagreement, and every pair with a moved broker is still
        verified up to the shorter of the two logs' limits."""
        if memo.messages:
            return False
        hws = self._hw
        agreed = self._agreed.get(p, _NONE)
        limits = memo.limits
        for b in memo.moved:
            log = logs.get(b)
            if log is None:
                continue  # a HW without a log is in no pair
            hw = hws.get(b, _NONE).get(p, 0)
            if type(hw) is not int:
                return False  # the full check reports what a malformed HW does
            n = len(log)
            limit = hw if hw < n else n
            if limit < 0:
                limit = 0
            row = agreed.get(b, _NONE)
            for other, other_limit in limits.items():
                if other != b and (limit if limit < other_limit else other_limit) > row.get(other, 0):
                    return False
            limits[b] = limit
        memo.moved.clear()
        return True

    def _agreement_pairs(self, p: str, logs: dict[str, list[Any]]) -> _Agreement:
        """Check every pair of logs of p below both HWs: how many pairs, and a message per disagreement."""
        hws = self._hw
        agreed = self._agreed.get(p)
        if agreed is None:
            agreed = self._agreed[p] = {}
        # Each log up to its broker's HW: a pair agrees up to the shorter of the two.
        # A negative HW (only a broken implementation makes one) holds nothing below it.
        held = [(b, log, max(0, min(hws.get(b, _NONE).get(p, 0), len(log)))) for b, log in logs.items()]
        pairs = 0
        messages: list[str] = []
        try:
            for i, (b1, log1, limit1) in enumerate(held):
                row = agreed.get(b1, _NONE)
                for b2, log2, limit2 in held[i + 1 :]:
                    pairs += 1
                    k = limit1 if limit1 < limit2 else limit2
                    verified = row.get(b2, 0)
                    if k <= verified:
                        continue
                    if log1[verified:k] == log2[verified:k]:
                        row = _agree(agreed, b1, b2, k)
                        continue
                    offset = _first_difference(log1[:k], log2[:k])
                    messages.append(f"{p}: brokers {b1} and {b2} disagree at offset {offset}, below both HWs: "
                                    f"broker {b1} has {_record(log1[offset])}, broker {b2} has "
                                    f"{_record(log2[offset])}")
        finally:
            # Counted once per partition, yet only the pairs reached: a malformed HW can raise midway.
            if pairs:
                self._count("ReplicaLogsAgree", pairs)
        return _Agreement(pairs, messages, {b: limit for b, _, limit in held})

    # -- epochs and fencing ------------------------------------------------------------------------------------

    def _epoch_checks(
        self, delta: dict[str, Any], controller_epoch: int, before: dict[str, Any], found: list[Violation]
    ) -> None:
        s = self.state
        if "controller_epoch" in delta:
            self._count("ControllerEpochMonotonic")
            if s["controller_epoch"] < controller_epoch:
                self._violate(found, "ControllerEpochMonotonic",
                              f"controller epoch went back from {controller_epoch}"
                              f"{self._elected_in(controller_epoch)} to {s['controller_epoch']} ({self._doer()})")
            elif s["controller"] != NO_LEADER:
                self._elected[s["controller_epoch"]] = s["controller"]
        for b, epoch in delta.get("broker_controller_epoch", _NONE).items():
            old = before["broker_controller_epoch"][b]
            restarted = b in delta.get("alive", _NONE)
            self._count("ControllerEpochMonotonic")
            if old is not None and epoch is not None and epoch < old and not restarted:
                self._violate(found, "ControllerEpochMonotonic",
                              f"broker {b} went back from controller epoch {old} to {epoch} without a restart "
                              f"({self._doer()})")
        for p, old in before.get("leader_epoch", _NONE).items():
            new = self._leader_epoch.get(p)
            self._count("LeaderEpochMonotonic")
            if old is not None and new is not None and new < old:
                self._violate(found, "LeaderEpochMonotonic",
                              f"{p}: leader epoch in the store went back from {old} to {new} ({self._doer()})")
        for (b, p), old in before.get("local_leader_epoch", _NONE).items():
            new = self._local_epoch.get(b, _NONE).get(p)
            self._count("LeaderEpochMonotonic")
            if old is not None and new is not None and new < old:
                self._violate(found, "LeaderEpochMonotonic",
                              f"{p}: broker {b} went back from leader epoch {old} to {new} ({self._doer()})")

    def _election_check(self, controller_epoch: Any, found: list[Violation]) -> None:
        """A broker that takes /controller raises the controller epoch in the same step: Kafka 2.3.0 creates
        /controller and writes the incremented /controller_epoch in one multi-op
        (KafkaZkClient.registerControllerAndIncrementControllerEpoch). Two controllers sharing an epoch
        could not be told apart by the epoch fence."""
        s = self.state
        if s["controller"] == NO_LEADER or "controller_epoch" not in self._report.observed:
            return
        self._count("ControllerEpochMonotonic")
        if s["controller_epoch"] <= controller_epoch:
            self._violate(found, "ControllerEpochMonotonic",
                          f"broker {s['controller']} became controller without raising the controller epoch: "
                          f"{s['controller_epoch']} after {controller_epoch}{self._elected_in(controller_epoch)} "
                          f"({self._doer()})")

    def _request_fencing_check(self, event: Event, actor_id: str, seen: Any, found: list[Violation]) -> None:
        args = event["args"]
        delta = event["state"]
        if seen is None:
            return  # a partial trace that does not observe the broker's controller epoch: nothing to judge
        self._count("StaleControllerFenced")
        if args["controller_epoch"] < seen and (
            args.get("applied") or any(actor_id in delta.get(var, _NONE) for var in REPLICA_VARS)
        ):
            stale = args["controller_epoch"]
            latest = self.state["controller_epoch"]
            self._violate(found, "StaleControllerFenced",
                          f"broker {actor_id} applied {event['action']} of stale controller epoch {stale}"
                          f"{self._elected_in(stale)} after seeing controller epoch {seen} (latest controller "
                          f"epoch {latest}{self._elected_in(latest)})")

    # -- state machines -----------------------------------------------------------------------------------

    def _refusal_checks(self, refused: Iterable[list[Any]], found: list[Violation]) -> None:
        """A state machine refuses exactly the transitions the table forbids: refusing one it allows is a
        table that differs from the model's (and a partition or replica stuck where Kafka would move it)."""
        for entry in refused:
            kind, partition, *rest = entry
            invariant, _, valid = _PARTITION_MACHINE if kind == "partition" else _REPLICA_MACHINE
            key: _Machine = partition if kind == "partition" else (partition, rest[0])
            try:
                allowed = (rest[-2], rest[-1]) in valid
            except TypeError:  # an unhashable state name is no state at all
                allowed = False
            if allowed:
                self._violate(found, invariant, f"{_machine(key)}: {self._doer()} refused {rest[-2]} -> {rest[-1]}, "
                                                f"a valid transition of the model's table")

    def _transition_checks(
        self, action: str, delta: dict[str, Any], chains: dict[_Machine, list[Any]], actor_id: str,
        found: list[Violation],
    ) -> None:
        loading = action in CONTEXT_LOAD_ACTIONS
        partition_states = self._partition_states.get(actor_id, _NONE)
        replica_states = self._replica_states.get(actor_id, _NONE)
        counts = {"ValidPartitionTransitions": 0, "ValidReplicaTransitions": 0}
        for key, chain in chains.items():
            if isinstance(key, tuple):
                invariant, absent, valid = _REPLICA_MACHINE
                final = replica_states.get(key[0], _NONE).get(key[1]) or absent
            else:
                invariant, absent, valid = _PARTITION_MACHINE
                final = partition_states.get(key) or absent
            counts[invariant] += len(chain) - 1
            current = absent if loading else chain[0] or absent  # a context load starts afresh
            for transition in chain[1:]:
                src, dst = transition
                if src is None:
                    if not loading:
                        self._violate(found, invariant,
                                      f"{_machine(key)}: state loaded as {dst} outside a controller failover "
                                      f"({self._doer()})")
                    current = dst
                    continue
                if src != current:
                    self._violate(found, invariant,
                                  f"{_machine(key)}: {self._doer()} moved it from {src} but its state was {current}")
                try:
                    allowed = transition in valid
                except TypeError:  # an unhashable state name is no state at all
                    allowed = False
                if not allowed:
                    self._violate(found, invariant,
                                  f"{_machine(key)}: {self._doer()} made the invalid transition {src} -> {dst} "
                                  f"(the model's table allows from {src}: {_targets(valid, src)})")
                current = dst
            if final != current:
                self._violate(found, invariant,
                              f"{_machine(key)}: transitions of {self._doer()} end in {current} but the state is "
                              f"{final}")
        for invariant, count in counts.items():
            if count:
                self._count(invariant, count)
        unloading = self._acting.get(actor_id, 0) == 0
        if not unloading:
            self._unexplained_changes(delta, chains, actor_id, loading, found)

    def _unexplained_changes(
        self, delta: dict[str, Any], chains: dict[_Machine, Any], actor_id: str, loading: bool,
        found: list[Violation],
    ) -> None:
        # Only the actor's own state machines are its to explain. A context load replaces the controller's
        # states wholesale (a re-elected controller first drops what it held), so a state it does not load
        # again is gone without a transition.
        for p, value in delta.get("partition_state", _NONE).get(actor_id, _NONE).items():
            if p not in chains and not (loading and value is None):
                self._violate(found, "ValidPartitionTransitions",
                              f"{p}: state changed to {value} without a transition ({self._doer()})")
        for p, replicas in delta.get("replica_state", _NONE).get(actor_id, _NONE).items():
            for r, value in replicas.items():
                if (p, r) not in chains and not (loading and value is None):
                    self._violate(found, "ValidReplicaTransitions",
                                  f"{p} replica {r}: state changed to {value} without a transition ({self._doer()})")


def _agree(agreed: dict[str, dict[str, int]], b1: str, b2: str, length: int) -> dict[str, int]:
    """Record that the logs of b1 and b2 agree below `length`; returns b1's row."""
    row = agreed.get(b1)
    if row is None:
        row = agreed[b1] = {}
    row[b2] = length
    other = agreed.get(b2)
    if other is None:
        other = agreed[b2] = {}
    other[b1] = length
    return row


def _record(entry: Any) -> str:
    """A log entry, [leader epoch, record], as explanations name it."""
    if isinstance(entry, list | tuple) and len(entry) == 2:
        return f"{list(entry)} (leader epoch {entry[0]})"
    return repr(entry)


def _targets(valid: frozenset[tuple[str, str]], src: Any) -> str:
    allowed = sorted(dst for s, dst in valid if s == src)
    return ", ".join(allowed) if allowed else "nothing"


def _machine(key: _Machine) -> str:
    """A chain's partition, or its partition and replica, as messages name them."""
    return f"{key[0]} replica {key[1]}" if isinstance(key, tuple) else key


def _first_difference(a: list[Any], b: list[Any]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def explain(events: Iterable[Event], invariant: str) -> list[Violation]:
    """The checker's explanation of a counterexample to `invariant` (an invariant named without a reading
    stands for each of its readings): its violations at the last step that violates it, none when the checker
    finds the invariant holding on these events."""
    checker = InvariantChecker()
    last: list[Violation] = []
    for event in events:
        hits = [v for v in checker.step(event) if invariant in (v.invariant, v.invariant.split("/")[0])]
        if hits:
            last = hits
    return last


def explanation(events: Iterable[Event], invariant: str) -> list[str]:
    """`explain` as the lines that end a counterexample printed by `kcm check` and `kcm prove --bmc`."""
    if invariant.split("/")[0] not in INVARIANTS:
        return [f"why: {invariant} is not one of kcm's invariants; the invariant checker does not judge it"]
    found = explain(events, invariant)
    if not found:
        return [f"why: the invariant checker finds no violation of {invariant} on these steps "
                "(a disagreement between the engines: please report it)"]
    return [f"why ({v.invariant}, step {v.seq}): {v.message}" for v in found]
