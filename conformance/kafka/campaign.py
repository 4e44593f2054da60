"""Apache Kafka itself under faults: each run a fresh ZooKeeper-mode cluster (kcm.impl.kafka.cluster), a topic
written by an `acks=all` producer while seeded faults hit the brokers and ZooKeeper, a calm phase, and every
acknowledged record read back. The brokers' `state-change.log` and `controller.log` are what kcm then judges
(kcm.conformance.kafka.judge); the run's own record (`run.json`) says what was done to it, and when.

The faults (`FAULTS`), each aimed at a broker chosen by the role it plays at that moment (the controller, the
leader of the data topic's first partition, a follower of it), recorded with the role:

* `kill`: SIGKILL, then a restart once its ZooKeeper session has expired (the controller moves its leaders).
* `pause`: SIGSTOP until its session has expired, then SIGCONT: a zombie controller when it was the controller,
  a zombie leader otherwise; both must find themselves fenced by the epochs.
* `shutdown`: SIGTERM, Kafka's controlled shutdown (leaders moved away first), then a restart.
* `failover`: `/controller` deleted, so every broker races for it (a controller failover without a death).
* `preferred`: Kafka's LeaderElectionCommand, a preferred election of every partition.
* `reassign`: a partition of the data topic reassigned through ReassignPartitionsCommand: from three replicas
  to two (a replica deleted) or back to three (a replica added, which must catch up), in a drawn order.
* `topic`: a topic created and deleted (the deletion's replica states).
* `zk-kill`: one ZooKeeper server of three SIGKILLed, then restarted (the quorum is kept).
* `leader-loss`: the sequence that makes an unclean election possible: both followers of partition 0 killed
  one after the other (out of the ISR), the leader left alone to take writes for a while, then killed; the
  followers restarted first, the old leader last. With `unclean.leader.election.enable` an out-of-sync
  follower becomes leader and the old leader's acknowledged records are truncated away; without it the
  partition waits for the old leader.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from kcm.impl.kafka import release as releases
from kcm.impl.kafka.admin import Admin, AdminError, Record, read_producer_log
from kcm.impl.kafka.cluster import SESSION_TIMEOUT_MS, KafkaCluster
from kcm.spec.atomic_output import write_output

FAULTS: Final = ("kill", "pause", "shutdown", "failover", "preferred", "reassign", "topic", "zk-kill",
                 "leader-loss")
# The default mix: every fault but leader-loss, which is the unclean-election experiment's.
DEFAULT_FAULTS: Final = FAULTS[:-1]
DATA_TOPIC: Final = "kcm-data"
_SESSION: Final = SESSION_TIMEOUT_MS / 1000
_EXPIRED: Final = _SESSION + 3.0  # the session expired and the controller has acted on it
_CALM_TIMEOUT: Final = 90.0

# The kcm knobs a Kafka topic has a setting for; the other knobs are Kafka's code, not its configuration.
_TOPIC_SETTINGS: Final = {"unclean_election": "unclean.leader.election.enable", "min_isr": "min.insync.replicas"}


class CampaignError(Exception):
    """A setting the campaign cannot apply; one line."""


@dataclass(frozen=True)
class CampaignPlan:
    runs: int = 1
    faults_per_run: int = 5
    faults: tuple[str, ...] = DEFAULT_FAULTS
    first_seed: int = 0
    release: str = releases.DEFAULT_RELEASE
    brokers: int = 3
    # The data topic's settings: the safe configuration by default.
    unclean_election: bool = False
    min_isr: int = 2
    throughput: int = 200  # records per second the producer offers

    def __post_init__(self) -> None:
        unknown = [f for f in self.faults if f not in FAULTS]
        if unknown:
            raise CampaignError(f"--faults {','.join(unknown)}: the faults are {', '.join(FAULTS)}")
        if not self.faults:
            raise CampaignError("--faults: name at least one fault")
        if self.brokers != 3:
            raise CampaignError(f"--brokers {self.brokers}: the campaign runs 3 brokers (roles: controller, "
                                "leader, followers of a 3-replica topic)")
        if not 1 <= self.min_isr <= 3:
            raise CampaignError(f"min_isr={self.min_isr}: the data topic has 3 replicas")
        releases.release(self.release)

    @property
    def zk_servers(self) -> int:
        return 3 if "zk-kill" in self.faults else 1

    def topic_configs(self) -> dict[str, str]:
        return {_TOPIC_SETTINGS["unclean_election"]: str(self.unclean_election).lower(),
                _TOPIC_SETTINGS["min_isr"]: str(self.min_isr)}


def plan_from_settings(settings: dict[str, str], **fields: Any) -> CampaignPlan:
    """A plan whose topic settings come from kcm's knobs (`--set unclean_election=true --set min_isr=1`)."""
    values: dict[str, Any] = {}
    for knob, text in settings.items():
        if knob not in _TOPIC_SETTINGS:
            raise CampaignError(f"--set {knob}: not a Kafka setting (Kafka {fields.get('release', 'R')} has its "
                                f"own rule for it); the campaign takes {', '.join(_TOPIC_SETTINGS)}")
        if knob == "unclean_election":
            if text not in ("true", "false"):
                raise CampaignError(f"--set unclean_election={text}: true or false")
            values[knob] = text == "true"
        else:
            try:
                values[knob] = int(text)
            except ValueError:
                raise CampaignError(f"--set min_isr={text}: an integer") from None
    return CampaignPlan(**fields, **values)


@dataclass
class FaultRecord:
    kind: str
    broker: int | None  # the broker it hit (None: a ZooKeeper server or the whole cluster)
    role: str  # controller, leader, follower, cluster, zookeeper
    at: float  # seconds since the run started
    detail: str = ""
    step: int = 0  # 0: the fault itself; 1, 2, ...: its later steps (leader-loss has several)


@dataclass
class RunRecord:
    name: str
    seed: int
    folder: str
    release: str
    topic_configs: dict[str, str]
    faults: list[FaultRecord] = field(default_factory=list)
    acked: int = 0
    read_back: int = 0
    lost: list[dict[str, Any]] = field(default_factory=list)  # acknowledged, never read back (first 20)
    lost_count: int = 0
    send_errors: dict[str, int] = field(default_factory=dict)
    calm: bool = False  # the cluster was whole (no partition under-replicated) before the end
    seconds: float = 0.0
    error: str = ""  # a run the campaign could not finish: why

    def log_files(self) -> list[Path]:
        folder = Path(self.folder)
        return sorted([*folder.glob("broker-*/state-change.log"), *folder.glob("broker-*/controller.log")])

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        return cls(**{**data, "faults": [FaultRecord(**f) for f in data.get("faults", [])]})


RUN_FILE: Final = "run.json"


def recorded_runs(out: Path) -> list[RunRecord]:
    """The runs a campaign wrote under `out`, in order, for judging again (a parser fixed since, say)."""
    records = []
    for path in sorted(out.glob(f"run-*/{RUN_FILE}")):
        try:
            records.append(RunRecord.from_json(json.loads(path.read_text())))
        except (OSError, ValueError, TypeError) as error:
            raise CampaignError(f"{path}: not a campaign run record ({error})") from None
    if not records:
        raise CampaignError(f"{out}: no campaign runs here (no run-*/{RUN_FILE})")
    return records


Progress = Callable[[str], None]


def run_campaign(plan: CampaignPlan, out: Path, progress: Progress = lambda _: None) -> list[RunRecord]:
    records = []
    for index in range(plan.runs):
        seed = plan.first_seed + index
        record = _run(plan, seed, out / f"run-{seed:03d}", progress)
        write_output(Path(record.folder) / RUN_FILE, json.dumps(record.to_json(), indent=2) + "\n")
        records.append(record)
    return records


class _Run:
    def __init__(self, plan: CampaignPlan, cluster: KafkaCluster, rng: random.Random, progress: Progress,
                 record: RunRecord) -> None:
        self.plan, self.cluster, self.rng, self.progress, self.record = plan, cluster, rng, progress, record
        self.admin = Admin(cluster)
        self.started = time.monotonic()
        self.topics = 0

    def note(self, kind: str, broker: int | None, role: str, detail: str = "", step: int = 0) -> None:
        at = round(time.monotonic() - self.started, 1)
        self.record.faults.append(FaultRecord(kind, broker, role, at, detail, step))
        self.progress(f"{self.record.name}: {at:6.1f} s {kind} {'' if broker is None else f'broker {broker} '}"
                      f"({role}){' ' + detail if detail else ''}")

    def roles(self) -> dict[str, list[int]]:
        """Who plays what now, of the live brokers: the controller, partition 0's leader and its followers."""
        controller = self.admin.controller()
        state = self.admin.zk_read(f"/brokers/topics/{DATA_TOPIC}/partitions/0/state")
        leader = -1 if state is None else int(json.loads(state)["leader"])
        live = [b for b in self.cluster.broker_ids if self.cluster.mode(b) == "running"]
        return {"controller": [b for b in live if b == controller], "leader": [b for b in live if b == leader],
                "follower": [b for b in live if b not in (leader, controller)]}

    def target(self) -> tuple[int, str] | None:
        roles = {role: brokers for role, brokers in self.roles().items() if brokers}
        if not roles:
            return None
        role = self.rng.choice(sorted(roles))
        return self.rng.choice(roles[role]), role

    # The faults

    def kill(self) -> None:
        if (hit := self.target()) is None:
            return
        self.cluster.kill(hit[0])
        self.note("kill", *hit)
        time.sleep(_EXPIRED)
        self.cluster.restart(hit[0])

    def pause(self) -> None:
        if (hit := self.target()) is None:
            return
        self.cluster.pause(hit[0])
        self.note("pause", *hit)
        time.sleep(_EXPIRED)
        self.cluster.resume(hit[0])
        time.sleep(4.0)

    def shutdown(self) -> None:
        if (hit := self.target()) is None:
            return
        clean = self.cluster.shut_down(hit[0])
        self.note("shutdown", *hit, "" if clean else "not exited in time: killed")
        time.sleep(2.0)
        self.cluster.restart(hit[0])

    def failover(self) -> None:
        before = self.admin.controller()
        self.admin.move_controller()
        time.sleep(4.0)
        self.note("failover", before, "controller", f"now {self.admin.controller()}")

    def preferred(self) -> None:
        self.admin.preferred_election()
        self.note("preferred", None, "cluster")
        time.sleep(2.0)

    def reassign(self) -> None:
        partition = self.rng.randrange(2)
        current = self.admin.assignment(DATA_TOPIC).get(partition, [])
        brokers = self.cluster.broker_ids
        if len(current) >= 3:
            target = self.rng.sample(current, 2)
        else:
            missing = [b for b in brokers if b not in current]
            target = list(current)
            target.insert(self.rng.randrange(len(target) + 1), self.rng.choice(missing))
        try:
            self.admin.reassign(DATA_TOPIC, {partition: target})
        except AdminError as error:
            # One still in progress, or a broker down: Kafka refuses, which is Kafka's answer, not kcm's fault.
            self.note("reassign", None, "cluster", f"refused: {error}")
            return
        self.note("reassign", None, "cluster", f"partition {partition} {current} -> {target}")
        time.sleep(4.0)

    def topic(self) -> None:
        self.topics += 1
        name = f"kcm-temp-{self.topics}"
        try:
            self.admin.create_topic(name, 1, 2)
            time.sleep(2.0)
            self.admin.delete_topic(name)
        except AdminError as error:
            self.note("topic", None, "cluster", f"refused: {error}")
            return
        self.note("topic", None, "cluster", f"{name} created and deleted")
        time.sleep(3.0)

    def zk_kill(self) -> None:
        ensemble = self.cluster.ensemble
        if ensemble is None or ensemble.servers < 3:
            return
        index = self.rng.randrange(ensemble.servers)
        ensemble.kill(index)
        self.note("zk-kill", None, "zookeeper", f"server {index + 1}")
        time.sleep(4.0)
        ensemble.restart(index)

    def leader_loss(self) -> None:
        roles = self.roles()
        state = self.admin.zk_read(f"/brokers/topics/{DATA_TOPIC}/partitions/0/state")
        if state is None:
            return
        leader = int(json.loads(state)["leader"])
        followers = [b for b in self.cluster.broker_ids if b != leader]
        if leader < 0 or any(self.cluster.mode(b) != "running" for b in self.cluster.broker_ids):
            return
        for step, follower in enumerate(followers):
            self.cluster.kill(follower)
            self.note("leader-loss", follower, "controller" if follower in roles["controller"] else "follower",
                      "follower killed", step)
            time.sleep(_EXPIRED)
        time.sleep(3.0)  # the leader alone takes writes, if min.insync.replicas lets it
        self.cluster.kill(leader)
        self.note("leader-loss", leader, "leader", "the last replica of the ISR killed", len(followers))
        time.sleep(2.0)
        for follower in followers:
            self.cluster.restart(follower)
        time.sleep(_EXPIRED)
        self.cluster.restart(leader)
        self.note("leader-loss", leader, "leader", "old leader restarted", len(followers) + 1)
        time.sleep(4.0)

    def calm(self) -> bool:
        """Every broker running, then no partition under-replicated and no reassignment pending."""
        for broker in self.cluster.broker_ids:
            mode = self.cluster.mode(broker)
            if mode == "paused":
                self.cluster.resume(broker)
            elif mode == "down":
                self.cluster.restart(broker)
        deadline = time.monotonic() + _CALM_TIMEOUT
        while time.monotonic() < deadline:
            try:
                if not self.admin.under_replicated() and not self.admin.reassignment_pending():
                    return True
            except AdminError:
                pass
            time.sleep(2.0)
        return False


def _run(plan: CampaignPlan, seed: int, folder: Path, progress: Progress) -> RunRecord:
    rng = random.Random(seed)
    record = RunRecord(folder.name, seed, str(folder), plan.release, plan.topic_configs())
    started = time.monotonic()
    cluster = KafkaCluster(folder, plan.brokers, plan.release, zk_servers=plan.zk_servers)
    progress(f"{record.name}: starting Kafka {plan.release} ({plan.brokers} brokers, "
             f"{plan.zk_servers} ZooKeeper server{'s' if plan.zk_servers > 1 else ''}) in {folder}")
    with cluster:
        cluster.start()
        run = _Run(plan, cluster, rng, progress, record)
        run.admin.create_topic(DATA_TOPIC, 2, 3, plan.topic_configs())
        producer = run.admin.producer(DATA_TOPIC, folder / "producer.jsonl", plan.throughput)
        try:
            time.sleep(3.0)
            for _ in range(plan.faults_per_run):
                kind = rng.choice(plan.faults)
                getattr(run, kind.replace("-", "_"))()
            record.calm = run.calm()
            progress(f"{record.name}: {'calm' if record.calm else 'not calm after 90 s'}; reading back")
            time.sleep(2.0)
        finally:
            producer.terminate()
            producer.wait(timeout=30)
        _read_back(run.admin, folder, record)
    record.seconds = round(time.monotonic() - started, 1)
    kinds = Counter(f.kind for f in record.faults if f.step == 0)
    progress(f"{record.name}: {sum(kinds.values())} faults ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}),"
             f" {record.acked:,} acknowledged, {record.lost_count:,} lost, {record.seconds:.0f} s")
    return record


def _read_back(admin: Admin, folder: Path, record: RunRecord) -> None:
    produced = read_producer_log(folder / "producer.jsonl")
    got = admin.read_topic(DATA_TOPIC)
    read = {(r.partition, r.offset): r.value for r in got}
    lost = [r for r in produced.acked if read.get((r.partition, r.offset)) != r.value]
    record.acked, record.read_back = len(produced.acked), len(got)
    record.send_errors = produced.errors
    record.lost_count = len(lost)
    record.lost = [_lost(r, read.get((r.partition, r.offset))) for r in lost[:20]]


def _lost(record: Record, found: str | None) -> dict[str, Any]:
    return {"partition": record.partition, "offset": record.offset, "value": record.value, "read": found}
