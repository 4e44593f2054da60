"""The scenario environment: the commands a scenario file drives a simulated `Cluster` with, step by step,
each printing what its step did (every event it produced, as `rendering` prints it).

Every event also goes through the invariant checker; a violation is printed as `VIOLATION <invariant>: ...`
under the event (only the first time that exact violation is found in the cluster's run: a broken state
keeps breaking the invariant at every step that touches it). A violation fails the run unless the file's
`cluster` line chose an unsafe knob and the very next command is `expect-violation <invariant>`; from then
on that invariant may be violated again in the same cluster without being expected again.

Commands (a broker may be given bare or as `broker=N`):

    cluster brokers=N [knob=value ...]      a new cluster (knobs as in spec.vocabulary.Knobs)
    create-topic T I=R,R,R [I=...]          create-partitions T I=R,R,R [...]     delete-topic T
    reassign T-I=R,R,R [...]                preferred-election T-I [T-I ...]
    produce broker=B partition=P [acks=-1] [count=1]
    crash B   restart B   crash-controller   expire-session B   controlled-shutdown B
    tick [N]   rebalance   shrink-isr broker=B partition=P   checkpoint B
    stabilize [verbose]                     Cluster.stabilize(); replication chatter hidden unless verbose
    quiesce [verbose]                       a calm phase: the Quiesce marker, then the fair schedule
                                            (Cluster.fair_round) until every progress property's bound has
                                            passed; prints each property's verdict (a violation of one fails
                                            the run as an invariant's does)
    replicate [verbose]                     deliver messages and follower fetches (never controller queues)
                                            until quiet, including the fetch a leader needs to learn a
                                            follower's log end (see `Cluster.behind`)
    deliver [N] | deliver index=I           deliver the N oldest messages (default 1), or message I (the
                                            oldest of its connection: connections are FIFO)
    drop I   duplicate I                    network faults on in-flight message I (see `messages`)
    fetch broker=B partition=P              one follower fetch (SendFetch)
    process-controller B                    take one event off broker B's controller queue
    messages   queues   state   log P       inspect: in-flight messages, controller queues, summary, logs
    expect-violation NAME [NAME ...]        the previous command's new violations include each NAME
                                            (NAME is an invariant, invariant/reading, or progress property)

`run_scenario` runs a file (and rewrites its expectations under KCM_REWRITE=1, see `language`);
`fill_expectations` writes the expected outputs of a scenario held in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from kcm.conformance.check.invariants import InvariantChecker, Violation
from kcm.conformance.scenario.language import Case, fill, parse, run_file
from kcm.conformance.scenario.rendering import render_event, render_logs, render_state, shows_when_quiet
from kcm.impl.messages import ACTION_OF
from kcm.impl.sim.cluster import Cluster, Event, broker_ids
from kcm.impl.sim.quiescence import calm_phase
from kcm.spec.vocabulary import HW_ACROSS_LEADERS, HW_PER_LEADER, INVARIANTS, PROPERTIES, Knobs

VIOLATION_NAMES: Final = frozenset({*INVARIANTS, HW_PER_LEADER, HW_ACROSS_LEADERS, *PROPERTIES})
MAX_REPLICATE_STEPS: Final = 10_000


class CommandError(Exception):
    """A scenario file used a command wrongly."""


class Environment:
    """The command interpreter: one instance runs one file (and may build several clusters in it)."""

    def __init__(self) -> None:
        self._cluster: Cluster | None = None
        self.knobs = Knobs()
        self.checker = InvariantChecker()
        self.fresh: list[Event] = []
        self.observers: list[Callable[[Event], None]] = []  # each event as the cluster makes it (coverage)
        self.pending: list[Violation] = []  # violations the next command must expect
        self.latest: list[Violation] = []  # the previous command's new violations
        self.seen: set[tuple[str, str]] = set()  # (invariant, message) already reported in this run
        self.tolerated: set[str] = set()  # invariants expected once in this run
        self.pending_at = ""
        self.location = ""
        self.failures: list[str] = []
        self.broken: list[Violation] = []  # violations that failed the run, for the mutants' oracles
        self.missed: list[str] = []  # violations a file expected and the run did not show
        self.commands: dict[str, Callable[[Case], list[str]]] = {
            "cluster": self.cmd_cluster,
            "create-topic": self.cmd_create_topic,
            "create-partitions": self.cmd_create_partitions,
            "delete-topic": self.cmd_delete_topic,
            "reassign": self.cmd_reassign,
            "preferred-election": self.cmd_preferred_election,
            "produce": self.cmd_produce,
            "crash": self.cmd_crash,
            "restart": self.cmd_restart,
            "crash-controller": self.cmd_crash_controller,
            "expire-session": self.cmd_expire_session,
            "controlled-shutdown": self.cmd_controlled_shutdown,
            "tick": self.cmd_tick,
            "rebalance": self.cmd_rebalance,
            "shrink-isr": self.cmd_shrink_isr,
            "checkpoint": self.cmd_checkpoint,
            "stabilize": self.cmd_stabilize,
            "quiesce": self.cmd_quiesce,
            "replicate": self.cmd_replicate,
            "deliver": self.cmd_deliver,
            "drop": self.cmd_drop,
            "duplicate": self.cmd_duplicate,
            "fetch": self.cmd_fetch,
            "process-controller": self.cmd_process_controller,
            "messages": self.cmd_messages,
            "queues": self.cmd_queues,
            "state": self.cmd_state,
            "log": self.cmd_log,
            "expect-violation": self.cmd_expect_violation,
        }

    # -- the runner's entry points -------------------------------------------------------------------------

    def __call__(self, case: Case) -> str:
        if case.name != "expect-violation":
            self._settle()
            self.latest = []
        command = self.commands.get(case.name)
        if command is None:
            raise CommandError(f"unknown command {case.name!r} (known: {', '.join(sorted(self.commands))})")
        self.location = case.location
        return "\n".join(command(case))

    def finish(self) -> None:
        """After the last case: every violation must have been expected."""
        self._settle()
        if self.failures:
            raise AssertionError("\n".join(self.failures))

    def _settle(self) -> None:
        for v in self.pending:
            self.failures.append(f"{self.pending_at}: unexpected VIOLATION {v.invariant}: {v.message}")
            self.broken.append(v)
        self.pending = []

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            raise CommandError("no cluster yet: start with `cluster brokers=N`")
        return self._cluster

    # -- events ----------------------------------------------------------------------------------------------

    def _drain(self, quiet: bool = False) -> list[str]:
        """Checks and renders the events the command produced."""
        events, self.fresh = self.fresh, []
        lines: list[str] = []
        found: list[Violation] = []
        for event in events:
            new = []
            for v in self.checker.step(event):
                if (v.invariant, v.message) not in self.seen:
                    self.seen.add((v.invariant, v.message))
                    new.append(v)
            found.extend(new)
            if not quiet or shows_when_quiet(event, new):
                lines.extend(render_event(event, self.checker.state, new))
        self.latest = found
        fresh = [v for v in found if not any(_names(name, v) for name in self.tolerated)]
        if fresh and not self.knobs.is_safe:
            self.pending = fresh
            self.pending_at = self.location
        elif fresh:
            self.broken.extend(fresh)
            self.failures.extend(
                f"{self.location}: VIOLATION {v.invariant} with safe knobs: {v.message}" for v in fresh
            )
        return lines

    # -- argument helpers --------------------------------------------------------------------------------------

    @staticmethod
    def _int(case: Case, key: str, default: int | None = None, position: int | None = None) -> int:
        value = case.get(key)
        if value is None and position is not None:
            words = case.bare_words()
            if position < len(words):
                value = words[position]
        if value is None:
            if default is None:
                raise CommandError(f"{case.name}: missing {key}")
            return default
        try:
            return int(value)
        except ValueError as err:
            raise CommandError(f"{case.name}: {key}={value!r} is not an integer") from err

    def _broker(self, case: Case) -> int:
        broker = self._int(case, "broker", position=0)
        if broker not in self.cluster.managers:
            raise CommandError(f"{case.name}: no broker {broker}")
        return broker

    @staticmethod
    def _str(case: Case, key: str, position: int | None = None) -> str:
        value = case.get(key)
        if value is None and position is not None:
            words = case.bare_words()
            if position < len(words):
                value = words[position]
        if value is None:
            raise CommandError(f"{case.name}: missing {key}")
        return value

    @staticmethod
    def _replicas(text: str) -> tuple[int, ...]:
        return tuple(int(r) for r in text.split(","))

    def _assignment(self, case: Case) -> dict[int, tuple[int, ...]]:
        spec = {int(a.key): self._replicas(a.value) for a in case.args if not a.bare}
        if not spec:
            raise CommandError(f"{case.name}: expected partition=replicas, e.g. 0=1,2,3")
        return spec

    # -- commands: the cluster and its operators ------------------------------------------------------------

    def cmd_cluster(self, case: Case) -> list[str]:
        brokers = self._int(case, "brokers")
        knobs = Knobs()
        for arg in case.args:
            if arg.key != "brokers":
                knobs = knobs.with_value(arg.key, arg.value)
        self.knobs = knobs
        self.checker = InvariantChecker(knobs.truncation)
        self.fresh = []
        self.seen = set()
        self.tolerated = set()
        self._cluster = Cluster(broker_ids(brokers), knobs, self._sink)
        return self._drain()

    def _sink(self, event: Event) -> None:
        self.fresh.append(event)
        for observe in self.observers:
            observe(event)

    def cmd_create_topic(self, case: Case) -> list[str]:
        topic = case.bare_words()[0]
        self.cluster.create_topic(topic, self._assignment(case))
        return self._drain()

    def cmd_create_partitions(self, case: Case) -> list[str]:
        topic = case.bare_words()[0]
        self.cluster.create_partitions(topic, self._assignment(case))
        return self._drain()

    def cmd_delete_topic(self, case: Case) -> list[str]:
        self.cluster.delete_topic(self._str(case, "topic", position=0))
        return self._drain()

    def cmd_reassign(self, case: Case) -> list[str]:
        targets = {a.key: self._replicas(a.value) for a in case.args if not a.bare}
        self.cluster.reassign(targets)
        return self._drain()

    def cmd_preferred_election(self, case: Case) -> list[str]:
        self.cluster.preferred_election(case.bare_words())
        return self._drain()

    def cmd_produce(self, case: Case) -> list[str]:
        broker = self._broker(case)
        partition = self._str(case, "partition")
        acks = self._int(case, "acks", -1)
        for _ in range(self._int(case, "count", 1)):
            self.cluster.produce(broker, partition, acks)
        return self._drain()

    def cmd_crash(self, case: Case) -> list[str]:
        self.cluster.crash(self._broker(case))
        return self._drain()

    def cmd_restart(self, case: Case) -> list[str]:
        self.cluster.restart(self._broker(case))
        return self._drain()

    def cmd_crash_controller(self, case: Case) -> list[str]:
        if self.cluster.crash_controller() is None:
            return ["no live controller"]
        return self._drain()

    def cmd_expire_session(self, case: Case) -> list[str]:
        self.cluster.expire_session(self._broker(case))
        return self._drain()

    def cmd_controlled_shutdown(self, case: Case) -> list[str]:
        self.cluster.request_controlled_shutdown(self._broker(case))
        return self._drain()

    def cmd_tick(self, case: Case) -> list[str]:
        for _ in range(self._int(case, "n", 1, position=0)):
            self.cluster.tick()
        return self._drain()

    def cmd_rebalance(self, case: Case) -> list[str]:
        self.cluster.tick(rebalance=True)
        return self._drain()

    def cmd_shrink_isr(self, case: Case) -> list[str]:
        self.cluster.shrink_isr(self._broker(case), self._str(case, "partition"))
        return self._drain()

    def cmd_checkpoint(self, case: Case) -> list[str]:
        self.cluster.checkpoint_hw(self._broker(case))
        return self._drain()

    # -- commands: stepping --------------------------------------------------------------------------------------

    def cmd_stabilize(self, case: Case) -> list[str]:
        self.cluster.stabilize()
        return self._drain(quiet="verbose" not in case.bare_words())

    def cmd_quiesce(self, case: Case) -> list[str]:
        before = dict(self.checker.report.checks)
        bounds = calm_phase(self.cluster)
        lines = self._drain(quiet="verbose" not in case.bare_words())
        checks = self.checker.report.checks
        violated = {v.invariant for v in self.latest}
        for name in PROPERTIES:
            verdict = "violated" if name in violated else "holds" if checks[name] > before.get(name, 0) else \
                "unobserved"
            lines.append(f"{name} {verdict} (bound {bounds[name]} rounds)")
        return lines

    def cmd_replicate(self, case: Case) -> list[str]:
        cluster = self.cluster
        for _ in range(MAX_REPLICATE_STEPS):
            if cluster.deliver_oldest() is not None:
                continue
            due = [
                (b, p)
                for b in cluster.live_brokers()
                for p in sorted(cluster.managers[b].replicas)
                if cluster.behind(b, p)
            ]
            if not due:
                break
            cluster.send_fetch(*due[0])
        else:
            raise CommandError(f"replicate did not settle within {MAX_REPLICATE_STEPS} steps")
        return self._drain(quiet="verbose" not in case.bare_words())

    def cmd_deliver(self, case: Case) -> list[str]:
        cluster = self.cluster
        if case.has("index"):
            index = self._in_flight(case)
            if index not in cluster.network.ready(cluster.now):
                raise CommandError(f"deliver: message {index} waits behind an older one on its connection")
            cluster.deliver(index)
            return self._drain()
        lines: list[str] = []
        for _ in range(self._int(case, "n", 1, position=0)):
            if cluster.deliver_oldest() is None:
                lines.append("no message in flight")
                break
        return self._drain() + lines

    def _in_flight(self, case: Case) -> int:
        index = self._int(case, "index", position=0)
        if not 0 <= index < len(self.cluster.network.in_flight):
            raise CommandError(f"{case.name}: no message {index} in flight")
        return index

    def cmd_drop(self, case: Case) -> list[str]:
        self.cluster.drop(self._in_flight(case))
        return self._drain()

    def cmd_duplicate(self, case: Case) -> list[str]:
        self.cluster.duplicate(self._in_flight(case))
        return self._drain()

    def cmd_fetch(self, case: Case) -> list[str]:
        broker = self._broker(case)
        partition = self._str(case, "partition")
        manager = self.cluster.managers[broker]
        if not manager.alive or not manager.wants_to_fetch(partition):
            return [f"broker {broker} has no fetch to send for {partition}"]
        self.cluster.send_fetch(broker, partition)
        return self._drain()

    def cmd_process_controller(self, case: Case) -> list[str]:
        broker = self._broker(case)
        if not self.cluster.controllers[broker].queue:
            return [f"broker {broker} has no controller event queued"]
        self.cluster.process_controller_event(broker)
        return self._drain()

    # -- commands: looking ------------------------------------------------------------------------------------

    def cmd_messages(self, case: Case) -> list[str]:
        lines = []
        network = self.cluster.network
        ready = set(network.ready(self.cluster.now))
        for i, flight in enumerate(network.in_flight):
            envelope = flight.envelope
            waits = "" if i in ready else " (waits)"
            lines.append(f"{i}: {envelope.src}->{envelope.dst} {ACTION_OF[type(envelope.message)]}{waits}")
        return lines or ["no message in flight"]

    def cmd_queues(self, case: Case) -> list[str]:
        lines = []
        for broker, controller in sorted(self.cluster.controllers.items()):
            if controller.queue:
                names = [f"{e.kind}({e.key})" if e.key else e.kind for e in controller.queue]
                lines.append(f"broker {broker}: {' '.join(names)}")
        return lines or ["all controller queues are empty"]

    def cmd_state(self, case: Case) -> list[str]:
        return render_state(self.checker.state)

    def cmd_log(self, case: Case) -> list[str]:
        return render_logs(self.checker.state, self._str(case, "partition", position=0))

    def cmd_expect_violation(self, case: Case) -> list[str]:
        names = case.bare_words()
        unknown = [n for n in names if n not in VIOLATION_NAMES]
        if not names or unknown:
            raise CommandError(f"expect-violation: unknown invariant(s) {unknown or '(none given)'}")
        if self.knobs.is_safe:
            self.failures.append(f"{self.location}: expect-violation on a cluster with safe knobs")
            return []
        for name in names:
            if not any(_names(name, v) for v in self.latest):
                self.missed.append(f"{self.location}: expected a {name} violation from the previous command")
                self.failures.append(self.missed[-1])
            self.tolerated.add(name)
            self.pending = [v for v in self.pending if not _names(name, v)]
        return []


def _names(name: str, violation: Violation) -> bool:
    """`name` is the violated invariant, or the invariant and its reading."""
    return name in (violation.invariant, violation.invariant.split("/")[0])


def run_scenario(path: Path, *, rewrite: bool | None = None) -> None:
    """Runs the file in a fresh environment: every output as expected (or rewritten, see `language.run_file`),
    and every violation expected."""
    environment = Environment()
    run_file(path, environment, rewrite=rewrite)
    environment.finish()


def fill_expectations(scenario: str) -> str:
    """The scenario's text with the output of each command as its expectation."""
    return fill(parse(Path("found.txt"), scenario), Environment())
