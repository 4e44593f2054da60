"""Apache Kafka itself in `kcm verify --kafka`: one run of the Kafka fault campaign (kcm.conformance.kafka) on a
3-broker 3.9.2 cluster kcm starts and stops, judged by the pipeline: one row per invariant and property the
logs let the checker judge, one for Z3 step validation and one for the client's view (every acknowledged
record read back). The run's knobs set the data topic where Kafka has a setting for them (`unclean_election`,
`min_isr`); a run on other knobs is `unsupported`, as Kafka's code has its own rule for them. Without Java,
Maven or the jars, one row says what is missing (`unknown`).
"""

from __future__ import annotations

import time

from kcm.conformance.kafka.campaign import CampaignError, plan_from_settings, run_campaign
from kcm.conformance.kafka.judge import CLIENT_CHECK, judge
from kcm.conformance.verify.stages import StageRow, VerifyContext, unsupported_row
from kcm.impl.kafka.admin import AdminError
from kcm.impl.kafka.cluster import KafkaError
from kcm.impl.kafka.release import KafkaMissing
from kcm.impl.zookeeper.ensemble import EnsembleError, ZooKeeperMissing
from kcm.spec.verdicts import HOLDS, UNKNOWN, UNOBSERVED, UNSUPPORTED, VIOLATED
from kcm.spec.vocabulary import Knobs

ENGINE = "kafka"
FAULTS_PER_RUN = 5


def stage(ctx: VerifyContext) -> list[StageRow]:
    if ctx.own_design is not None:
        return [unsupported_row(ENGINE, ctx.own_design, "Kafka runs its own code, not a design's strategy")]
    started = time.perf_counter()
    settings = _settings(ctx.knobs)
    if settings is None:
        return [StageRow(ENGINE, "campaign", UNSUPPORTED, "Kafka has no setting for these knobs (only "
                         "unclean_election and min_isr are Kafka settings)", 0.0)]
    try:
        plan = plan_from_settings(settings, runs=1, faults_per_run=FAULTS_PER_RUN)
        with ctx.reporter.task(f"kafka campaign (1 run, {FAULTS_PER_RUN} faults)"):
            runs = run_campaign(plan, ctx.out / "kafka", ctx.reporter.line)
        with ctx.reporter.task("kafka judgement (pipeline)"):
            judgement = judge(runs, ctx.out / "kafka")
    except (KafkaMissing, KafkaError, ZooKeeperMissing, EnsembleError, AdminError, CampaignError) as error:
        return [StageRow(ENGINE, "campaign", UNKNOWN, str(error), time.perf_counter() - started)]
    seconds = time.perf_counter() - started
    ingest = judgement.ingest
    lines = (f"{ingest['read']:,} lines = {ingest['checked']:,} events + {ingest['skipped']:,} skipped + "
             f"{ingest['quarantined']:,} quarantined")
    rows = [StageRow(ENGINE, name, UNKNOWN if verdict == HOLDS and ingest["quarantined"] else verdict, lines,
                     seconds) for name, verdict in sorted(judgement.verdicts.items()) if verdict != UNOBSERVED]
    validation = judgement.validation
    explained = validation.get("ok", 0) == validation.get("runs", 0) and not validation.get("unexplained")
    rows.append(StageRow(ENGINE, "Z3 step validation", HOLDS if explained else UNKNOWN,
                         f"{validation.get('ok', 0)}/{validation.get('runs', 0)} runs explained, "
                         f"{validation.get('steps', 0):,} steps", seconds))
    run = runs[0]
    rows.append(StageRow(ENGINE, CLIENT_CHECK, VIOLATED if run.lost_count else HOLDS,
                         f"{run.acked:,} acknowledged, {run.lost_count:,} not read back", seconds))
    return rows


def _settings(knobs: Knobs) -> dict[str, str] | None:
    default = Knobs()
    changed = {name for name in ("truncation", "controller_epoch_fencing", "leader_epoch_check", "broker_epoch")
               if getattr(knobs, name) != getattr(default, name)}
    if changed:
        return None
    settings = {"unclean_election": str(knobs.unclean_election).lower()}
    if knobs.min_isr != default.min_isr:
        settings["min_isr"] = str(knobs.min_isr)
    return settings
