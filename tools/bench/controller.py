"""Controller benchmark: how long the active controller takes to handle a broker failure and a controlled
shutdown on a large cluster, against the same operations on a 10x smaller cluster measured in the same run.

Run it with `python -m kcm.tools.bench.controller` (`--quick` for smaller clusters).

The clusters: 100 brokers, 100 topics x 100 partitions, replication factor 3 (the baseline: 10 brokers,
10 topics x 100 partitions). Replicas are placed round-robin with a per-topic shift of the followers, so
each broker leads ~100 partitions and holds ~300 replicas in *both* clusters. The per-broker load is then
the same and the ratio large/small shows how the handling grows with the size of the cluster alone.

Setup, as a user would build it: `Cluster.create_topic` for each topic, then `Cluster.stabilize()`, which
also runs every follower's first fetch (3 steps per follower replica, 60,000 for the large cluster); its
time is reported. It runs within a time budget (`--stabilize-budget`): if it has not finished by then, its
total is extrapolated from the growth of its per-step cost, and the cluster is finished the fast way
through the same public API: the remaining controller events and messages in stabilize's order, without
the follower fetches, which the controller's decisions do not depend on (a new partition's ISR is all its
live replicas). `--stabilize-budget 0` builds the fast way only. The trace sink counts events and drops
them.

Measured operations, never bypassing the controller:
  broker failure       a non-controller broker crashes (`Cluster.crash`, not timed); timed: the
                       controller's `Cluster.process_controller_event` until its queue is empty (the
                       BrokerChange event: elections, ISR removals in the store, the request batch).
  controlled shutdown  the broker sends ControlledShutdownRequest (not timed); timed: `Cluster.deliver` of
                       that request to the controller, which handles it at once (leader moves, followers
                       offline, the response).
Two timings for each: "step" is the whole Cluster step (Controller.process, sending, the trace delta of
impl/abstraction.py and the event handed to the sink); "process" is the bare `Controller.process` call
inside it, timed by a wrapper on the controller instance. Between repetitions the broker is restarted,
its followers fetch until back in the ISR and a preferred-leader election restores the leaders, so each
repetition starts from the same healthy steady state (checked).
"""

from __future__ import annotations

import cProfile
import gc
import itertools
import json
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import patch

from rich.console import Console

from kcm.impl.controller import Controller, StepResult
from kcm.impl.messages import (
    ControlledShutdownRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from kcm.impl.sim.cluster import Cluster, Event, broker_ids
from kcm.spec.vocabulary import NO_LEADER, Knobs
from kcm.tools import interpreted
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    current_rss_mib,
    median,
    peak_rss_mib,
    print_footer,
    print_header,
    profile_top,
    progress,
    ratio,
    table,
    write_summary,
)
from kcm.tools.bench.run import command

NAME = "controller"
TARGET_SECONDS = 1.0
STABILIZE_CHUNK = 500
REQUEST_KINDS = (LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)


@dataclass(frozen=True, slots=True)
class ClusterSize:
    label: str
    brokers: int
    topics: int
    partitions_per_topic: int = 100
    replication_factor: int = 3

    @property
    def partitions(self) -> int:
        return self.topics * self.partitions_per_topic

    @property
    def follower_replicas(self) -> int:
        return self.partitions * (self.replication_factor - 1)

    def describe(self) -> str:
        return (
            f"{self.brokers} brokers, {self.partitions:,} partitions "
            f"({self.topics} topics x {self.partitions_per_topic}, RF {self.replication_factor})"
        )


def assignment(size: ClusterSize, topic: int) -> dict[int, tuple[int, ...]]:
    """Round-robin placement: partition j of topic t is led by the broker at position (t + j) mod B, and its
    followers sit at distinct offsets after the leader that shift with the topic, spreading each broker's
    followers."""
    brokers = size.brokers
    ids = broker_ids(brokers)  # the ids of the bench's cluster, by position
    shift = topic % (brokers - 1) if brokers > 1 else 0
    result: dict[int, tuple[int, ...]] = {}
    for index in range(size.partitions_per_topic):
        first = (topic + index) % brokers
        followers = [
            (first + 1 + (shift + k) % (brokers - 1)) % brokers for k in range(size.replication_factor - 1)
        ]
        result[index] = tuple(ids[b] for b in (first, *followers))
    return result


class Sink:
    """The trace sink: counts events, keeps them only while `capture` is on."""

    def __init__(self) -> None:
        self.events = 0
        self.capture = False
        self.captured: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events += 1
        if self.capture:
            self.captured.append(event)


class ProcessTimer:
    """Stands in for one controller's `process` method: calls it, adds up the time spent inside it, and
    keeps the results (the requests it produced)."""

    def __init__(self, inner: Callable[[int], StepResult]) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.results: list[StepResult] = []

    def __call__(self, now: int) -> StepResult:
        start = time.perf_counter()
        result = self.inner(now)
        self.seconds += time.perf_counter() - start
        self.results.append(result)
        return result


@dataclass(slots=True)
class OpSample:
    """One measured handling of one operation."""

    step_seconds: float = 0.0
    process_seconds: float = 0.0
    controller_events: int = 0
    requests: Counter[str] = field(default_factory=Counter)
    entries: Counter[str] = field(default_factory=Counter)
    moved: int = 0
    leaderless: int = 0
    isr_shrunk: int = 0
    remaining: int = 0
    trace_bytes: int = 0
    tracemalloc_peak: int = 0


@dataclass(slots=True)
class BuildTimes:
    elect_seconds: float = 0.0
    create_seconds: float = 0.0
    stabilize_seconds: float = 0.0  # Cluster.stabilize(), within the budget
    stabilize_steps: int = 0
    expected_steps: int = 0
    finished: bool = False  # stabilize() reached quiescence within the budget
    estimate_seconds: float = 0.0  # the whole stabilize(): measured if finished, else extrapolated
    finish_seconds: float = 0.0  # the fast finish, when the budget ran out
    finish_steps: int = 0
    rss_mib: float = 0.0  # peak so far, the build included
    current_rss_mib: float = 0.0  # after the build

    @property
    def total(self) -> float:
        return self.elect_seconds + self.create_seconds + self.stabilize_seconds + self.finish_seconds


class Bench:
    """One cluster in its steady state, and the operations measured on it."""

    def __init__(self, size: ClusterSize) -> None:
        self.size = size
        self.sink = Sink()
        self.times = BuildTimes()
        start = time.perf_counter()
        self.cluster = Cluster(broker_ids(size.brokers), Knobs(), self.sink)
        self.cluster.stabilize()  # no topics yet: only the controller election
        self.controller_id = self.cluster.controller_holder()
        self.times.elect_seconds = time.perf_counter() - start

    # -- building the steady state ---------------------------------------------------------------------------

    def build(self, out: Console, budget: float) -> None:
        """`create_topic` for every topic, then `stabilize()` in chunks until it is done or `budget` seconds
        have gone; then, if needed, the fast finish (`settle`)."""
        times = self.times
        start = time.perf_counter()
        for topic in range(self.size.topics):
            self.cluster.create_topic(f"t{topic}", assignment(self.size, topic))
        times.create_seconds = time.perf_counter() - start
        # The controller's event and deliveries (about 2 per broker), then a fetch, its delivery and the
        # response per follower replica.
        times.expected_steps = 2 * self.size.brokers + 1 + 3 * self.size.follower_replicas
        samples: list[tuple[float, float]] = []
        with progress(out) as bar:
            task = bar.add_task(f"stabilize() {self.size.label} cluster", total=times.expected_steps)
            start = time.perf_counter()
            while budget > 0:
                try:
                    times.stabilize_steps += len(self.cluster.stabilize(max_steps=STABILIZE_CHUNK))
                    times.finished = True
                except RuntimeError:  # not quiet yet after this chunk
                    times.stabilize_steps += STABILIZE_CHUNK
                elapsed = time.perf_counter() - start
                samples.append((float(times.stabilize_steps), elapsed))
                bar.update(task, completed=times.stabilize_steps)
                if times.finished or elapsed > budget:
                    break
            times.stabilize_seconds = time.perf_counter() - start if budget > 0 else 0.0
        if times.finished:
            times.estimate_seconds = times.stabilize_seconds
        else:
            times.estimate_seconds = (
                _extrapolate(samples, float(times.expected_steps)) if samples else float("nan")
            )
            start = time.perf_counter()
            times.finish_steps = self.settle()
            times.finish_seconds = time.perf_counter() - start
        times.rss_mib = peak_rss_mib()
        gc.collect()
        times.current_rss_mib = current_rss_mib()
        self.check_healthy()

    def describe_build(self, budget: float) -> str:
        t = self.times
        head = f"built {self.size.label} in {t.total:.1f} s: create_topic x{self.size.topics}"
        head += f" {t.create_seconds:.2f} s"
        if t.finished:
            body = f", stabilize() {t.stabilize_seconds:.1f} s ({t.stabilize_steps:,} steps)"
        elif budget > 0:
            body = (
                f", stabilize() stopped at the {budget:g} s budget after {t.stabilize_steps:,} of "
                f"~{t.expected_steps:,} steps (extrapolated total ~{t.estimate_seconds:,.0f} s), finished "
                f"without the remaining follower fetches in {t.finish_seconds:.1f} s "
                f"({t.finish_steps:,} steps)"
            )
        else:
            body = f", {t.finish_steps:,} steps without follower fetches {t.finish_seconds:.1f} s"
        return f"{head}{body}; RSS {t.current_rss_mib:,.0f} MiB after it, peak so far {t.rss_mib:,.0f} MiB"

    @property
    def controller(self) -> Controller:
        return self.cluster.controllers[self.controller_id]

    def settle(self, tick: Callable[[], None] | None = None, messages_first: bool = False) -> int:
        """Stabilize's order without the follower fetches: the lowest broker's controller event first, else
        the oldest message; until nothing is left. With `messages_first`, messages go before controller
        events instead, so that the controller handles a burst of ISR change notifications in one event
        (as Kafka's brokers batch them) rather than one by one, each with UpdateMetadata to every broker."""
        cluster = self.cluster
        steps = 0
        while True:
            if messages_first and cluster.deliver_oldest() is not None:
                pass
            else:
                waiting = next((b for b in cluster.live_brokers() if cluster.controllers[b].queue), None)
                if waiting is not None:
                    cluster.process_controller_event(waiting)
                elif messages_first or cluster.deliver_oldest() is None:
                    return steps
            steps += 1
            if tick is not None:
                tick()

    def restore(self, broker: int) -> None:
        """Back to the steady state after `broker` stopped: restart it, let its followers fetch until the
        leaders add them to the ISR, then move leadership back to the preferred replicas."""
        cluster = self.cluster
        cluster.restart(broker)
        self.settle()
        for _ in range(10):
            pending = [p for p in sorted(cluster.managers[broker].replicas) if cluster.behind(broker, p)]
            if not pending:
                break
            for partition in pending:
                cluster.send_fetch(broker, partition)
            self.settle(messages_first=True)
        ctx = self.controller.ctx
        assert ctx is not None
        movable = sorted(p for p, s in ctx.leadership.items() if s.leader != ctx.assignment[p][0])
        if movable:
            cluster.preferred_election(movable)
            self.settle()
        self.check_healthy()

    def check_healthy(self) -> None:
        """Every broker up, every partition led by its preferred replica with a full ISR, nothing queued."""
        cluster = self.cluster
        ctx = self.controller.ctx
        problems = []
        if ctx is None or cluster.controller_holder() != self.controller_id:
            problems.append("controller moved")
        else:
            if len(ctx.leadership) != self.size.partitions:
                problems.append(f"{len(ctx.leadership)} partitions with a leader")
            for partition, state in ctx.leadership.items():
                replicas = ctx.assignment[partition]
                if state.leader != replicas[0] or sorted(state.isr) != sorted(replicas):
                    problems.append(
                        f"{partition}: leader {state.leader}, ISR {state.isr}, replicas {replicas}"
                    )
                    break
        if len(cluster.live_brokers()) != self.size.brokers:
            problems.append("a broker is down")
        if cluster.network.in_flight:
            problems.append("messages in flight")
        if problems:
            raise RuntimeError(f"{self.size.label} cluster is not in its steady state: {'; '.join(problems)}")

    # -- the measured operations ---------------------------------------------------------------------------

    def _leaders(self) -> dict[str, tuple[int, int]]:
        ctx = self.controller.ctx
        assert ctx is not None
        return {p: (s.leader, len(s.isr)) for p, s in ctx.leadership.items()}

    def _timed(self, action: Callable[[], None], traced: bool, profiler: cProfile.Profile | None) -> OpSample:
        """Runs `action` with the controller's `process` wrapped, and the sink capturing the events."""
        before = self._leaders()
        sample = OpSample()
        timer = ProcessTimer(self.controller.process)
        self.sink.capture = not traced
        gc.collect()
        with patch.object(self.controller, "process", timer):
            if traced:
                tracemalloc.start()
                tracemalloc.reset_peak()
            if profiler is not None:
                profiler.enable()
            start = time.perf_counter()
            action()
            sample.step_seconds = time.perf_counter() - start
            if profiler is not None:
                profiler.disable()
            if traced:
                sample.tracemalloc_peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
        self.sink.capture = False
        sample.process_seconds = timer.seconds
        sample.controller_events = len(timer.results)
        for result in timer.results:
            for envelope in result.out:
                message = envelope.message
                sample.requests[type(message).__name__] += 1
                if isinstance(message, REQUEST_KINDS):
                    sample.entries[type(message).__name__] += len(message.partitions)
            sample.remaining += len(result.args.get("remaining", ()))
        sample.trace_bytes = sum(len(json.dumps(e, separators=(",", ":"))) + 1 for e in self.sink.captured)
        self.sink.captured.clear()
        after = self._leaders()
        for partition, (leader, isr) in before.items():
            new_leader, new_isr = after.get(partition, (NO_LEADER, 0))
            if new_leader != leader:
                if new_leader == NO_LEADER:
                    sample.leaderless += 1
                else:
                    sample.moved += 1
            if new_isr < isr:
                sample.isr_shrunk += 1
        return sample

    def broker_failure(
        self, victim: int, traced: bool = False, profiler: cProfile.Profile | None = None
    ) -> OpSample:
        cluster = self.cluster
        controller = self.controller
        cluster.crash(victim)  # the fault itself is not timed

        def handle() -> None:
            while controller.queue:
                cluster.process_controller_event(self.controller_id)

        sample = self._timed(handle, traced, profiler)
        self.settle()
        self.restore(victim)
        return sample

    def controlled_shutdown(
        self, victim: int, traced: bool = False, profiler: cProfile.Profile | None = None
    ) -> OpSample:
        cluster = self.cluster
        cluster.request_controlled_shutdown(victim)  # the broker sends its request: not timed
        index = next(
            i
            for i, m in enumerate(cluster.network.in_flight)
            if isinstance(m.envelope.message, ControlledShutdownRequest) and m.envelope.src == victim
        )
        if cluster.network.in_flight[index].envelope.dst != self.controller_id:
            raise RuntimeError(
                f"broker {victim} sent its shutdown request to another broker than the controller"
            )

        def handle() -> None:
            cluster.deliver(index)

        sample = self._timed(handle, traced, profiler)
        self.settle()  # the response stops the broker; the controller then handles its BrokerChange
        if cluster.managers[victim].alive:
            raise RuntimeError(f"broker {victim} did not stop after its controlled shutdown")
        self.restore(victim)
        return sample

    def victims(self, count: int) -> list[int]:
        """Non-controller brokers spread over the cluster, reused when the cluster has fewer."""
        others = [b for b in sorted(self.cluster.managers) if b != self.controller_id]
        stride = max(1, len(others) // max(1, count))
        return [others[(i * stride) % len(others)] for i in range(count)]


# -- the setup's extrapolation ---------------------------------------------------------------------------


def _extrapolate(samples: Sequence[tuple[float, float]], total: float) -> float:
    """The first chunk holds the heavy steps (topic creation, full metadata to every broker); after it, the
    cost of a chunk grows linearly with the steps taken. Fit cost(k) = a + b*k on the later chunks (least
    squares, k the chunk's midpoint) and integrate it up to `total`."""
    if len(samples) < 3:
        k, t = samples[-1]
        return t * total / k
    points = []
    for (k0, t0), (k1, t1) in itertools.pairwise(samples[1:]):
        points.append(((k0 + k1) / 2, (t1 - t0) / (k1 - k0)))
    n = len(points)
    mean_k = sum(k for k, _ in points) / n
    mean_c = sum(c for _, c in points) / n
    spread = sum((k - mean_k) ** 2 for k, _ in points)
    slope = max(0.0, sum((k - mean_k) * (c - mean_c) for k, c in points) / spread) if spread > 0 else 0.0
    intercept = max(0.0, mean_c - slope * mean_k)
    k_first, t_first = samples[0]
    return t_first + intercept * (total - k_first) + slope * (total**2 - k_first**2) / 2


# -- the report ---------------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def _timing_table(title: str, rows: list[tuple[Bench, list[OpSample], OpSample]]) -> Any:
    result = table(
        f"{title}: time",
        ["cluster", "step (median)", "step min..max", "process (median)", "trace share", "tracemalloc peak"],
    )
    for bench, samples, traced in rows:
        steps = [s.step_seconds for s in samples]
        procs = [s.process_seconds for s in samples]
        share = 1 - median(procs) / median(steps) if median(steps) > 0 else float("nan")
        result.add_row(
            f"{bench.size.label}: {bench.size.partitions:,} partitions",
            _ms(median(steps)),
            f"{min(steps) * 1000:,.1f}..{max(steps) * 1000:,.1f} ms",
            _ms(median(procs)),
            f"{share:.0%}",
            f"{traced.tracemalloc_peak / 2**20:,.1f} MiB",
        )
    return result


def _work_table(title: str, rows: list[tuple[Bench, list[OpSample], OpSample]]) -> Any:
    result = table(
        f"{title}: work (requests: count, partition entries)",
        [
            "cluster",
            "leaders moved",
            "ISR shrunk",
            "LeaderAndIsr",
            "UpdateMetadata",
            "StopReplica",
            "events",
            "trace JSON",
        ],
    )
    for bench, samples, _ in rows:
        first = samples[0]

        def requests(kind: str, sample: OpSample = first) -> str:
            return f"{sample.requests[kind]}, {sample.entries[kind]:,}"

        moved = f"{first.moved}" + (f" (+{first.leaderless} leaderless)" if first.leaderless else "")
        result.add_row(
            f"{bench.size.label}: {bench.size.partitions:,} partitions",
            moved,
            f"{first.isr_shrunk}",
            requests("LeaderAndIsrRequest"),
            requests("UpdateMetadataRequest"),
            requests("StopReplicaRequest"),
            f"{first.controller_events}",
            f"{first.trace_bytes / 1024:,.0f} KiB",
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    if interpreted.compiled():
        # It times Controller.process by wrapping it, which a compiled controller refuses.
        rerun = command("controller", sys.argv[1:] if argv is None else argv, interpreted=True)
        return subprocess.run(rerun, check=False).returncode
    parser = base_parser(NAME, "Controller handling of a broker failure and a controlled shutdown.")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions of each operation (median)")
    parser.add_argument(
        "--stabilize-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time allowed to Cluster.stabilize() per cluster before it is extrapolated and the build "
        "finished without follower fetches (default 60, 10 with --quick; 0: no stabilize())",
    )
    parser.add_argument(
        "--full-stabilize",
        action="store_true",
        help="run Cluster.stabilize() to the end, however long it takes",
    )
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    out = console()
    print_header(out, "kcm controller benchmark", command_line(NAME, argv_list))

    if args.quick:
        large, small = ClusterSize("large", 40, 40), ClusterSize("small", 4, 4)
    else:
        large, small = ClusterSize("large", 100, 100), ClusterSize("small", 10, 10)
    budget = args.stabilize_budget if args.stabilize_budget is not None else (10.0 if args.quick else 60.0)
    if args.full_stabilize:
        budget = float("inf")
    out.print(f"large   : {large.describe()}")
    out.print(f"baseline: {small.describe()} (10x smaller; same ~100 leaders and ~300 replicas per broker)")
    out.print(
        f"repeats : {args.repeat} per operation (median), plus 1 under tracemalloc; fresh broker each time"
    )

    benches = []
    for size in (small, large):
        bench = Bench(size)
        bench.build(out, budget)
        benches.append(bench)
        out.print(bench.describe_build(budget))

    results: dict[str, list[tuple[Bench, list[OpSample], OpSample]]] = {}
    operations: list[tuple[str, Callable[[Bench, int, bool], OpSample]]] = [
        ("broker failure", lambda b, v, traced: b.broker_failure(v, traced)),
        ("controlled shutdown", lambda b, v, traced: b.controlled_shutdown(v, traced)),
    ]
    victims = {id(b): iter(b.victims(2 * (args.repeat + 1))) for b in benches}
    with progress(out) as bar:
        task = bar.add_task("measuring", total=len(operations) * len(benches) * (args.repeat + 1))
        for op_name, op in operations:
            per_bench: dict[int, list[OpSample]] = {id(b): [] for b in benches}
            traced_samples: dict[int, OpSample] = {}
            for rep in range(args.repeat + 1):
                for bench in benches:  # interleaved, so that drift hits both clusters alike
                    traced = rep == args.repeat
                    sample = op(bench, next(victims[id(bench)]), traced)
                    if traced:
                        traced_samples[id(bench)] = sample
                    else:
                        per_bench[id(bench)].append(sample)
                    bar.advance(task)
            results[op_name] = [(b, per_bench[id(b)], traced_samples[id(b)]) for b in benches]

    rss_measured = peak_rss_mib()
    figures: list[Figure] = []
    out.print()
    out.print(
        "step    = Cluster step: Controller.process + sending + trace delta (impl/abstraction.py) + event"
    )
    out.print("process = the bare Controller.process call(s) inside the step")
    out.print("requests: count and partition entries of what Controller.process produced")
    for op_name, rows in results.items():
        out.print()
        out.print(_timing_table(op_name, rows))
        out.print(_work_table(op_name, rows))
        (small_b, small_s, _), (large_b, large_s, _) = rows
        step_large, step_small = (
            median([s.step_seconds for s in large_s]),
            median([s.step_seconds for s in small_s]),
        )
        proc_large, proc_small = (
            median([s.process_seconds for s in large_s]),
            median([s.process_seconds for s in small_s]),
        )
        met = step_large < TARGET_SECONDS
        out.print(
            f"{op_name}: large/small = step {ratio(step_large, step_small)}, process "
            f"{ratio(proc_large, proc_small)} for a 10x larger cluster; target < {TARGET_SECONDS:g} s on "
            f"{large.partitions:,} partitions: {'met' if met else 'NOT met'} ({_ms(step_large)})"
        )
        key = op_name
        figures.append(
            Figure(
                NAME,
                f"{key}: step ({large.partitions:,} partitions)",
                step_large,
                "s",
                f"< {TARGET_SECONDS:g} s",
                met,
                f"{ratio(step_large, step_small)} the 10x smaller cluster",
            )
        )
        figures.append(
            Figure(
                NAME,
                f"{key}: Controller.process ({large.partitions:,} partitions)",
                proc_large,
                "s",
                f"< {TARGET_SECONDS:g} s",
                proc_large < TARGET_SECONDS,
                f"{ratio(proc_large, proc_small)} the 10x smaller cluster",
            )
        )
    out.print()
    out.print(
        "Kafka 1.1.0 reference: controlled shutdown of a broker with 10k partitions went from 6.5 min to 3 s."
    )
    out.print(
        f"RSS: {current_rss_mib():,.0f} MiB now, peak {rss_measured:,.0f} MiB (ru_maxrss, whole process; "
        "stabilize() keeps each call's events, the heavy ones of the topics' creation included)"
    )

    small_b, large_b = benches
    if budget > 0:
        lt, st = large_b.times, small_b.times
        out.print(
            f"setup with stabilize(), large/small: {ratio(lt.estimate_seconds, st.estimate_seconds)} "
            f"({'measured' if lt.finished else 'extrapolated'})"
        )
        figures.append(
            Figure(
                NAME,
                f"setup: create_topic + stabilize() ({large.partitions:,} partitions)"
                + ("" if lt.finished else ", extrapolated"),
                lt.create_seconds + lt.estimate_seconds,
                "s",
                "",
                None,
                f"{ratio(lt.create_seconds + lt.estimate_seconds, st.create_seconds + st.estimate_seconds)} "
                "the 10x smaller cluster",
            )
        )
    figures.append(Figure(NAME, "peak RSS (ru_maxrss)", rss_measured, "MiB"))

    profiles: list[str] = []
    if args.profile:
        extra = large_b.victims(2 * (args.repeat + 2))[-2:]
        for op_label, run_op, victim in (
            ("broker failure", Bench.broker_failure, extra[0]),
            ("controlled shutdown", Bench.controlled_shutdown, extra[1]),
        ):
            profiler = cProfile.Profile()
            run_op(large_b, victim, False, profiler)
            profiles.append(f"cProfile of the {op_label} step on the large cluster\n{profile_top(profiler)}")
    for text in profiles:
        out.print()
        out.print(text, markup=False, highlight=False)
    print_footer(out)
    write_summary(args.summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
