"""`kcm kafka fetch|start|stop|status|campaign`: Apache Kafka itself, in ZooKeeper mode, run and judged by kcm.

* `fetch [--release R]`: Maven resolves the release's jars from Maven Central (kcm.impl.kafka.release).
* `start [--brokers 3] [--release R] [--dir DIR] [--zk HOSTS]`: a cluster on loopback ports of kcm's choosing,
  on a ZooKeeper kcm starts under DIR (or the one given), left running until `stop`; prints the bootstrap
  servers. `status` lists the brokers, `stop` ends every process `start` began.
* `campaign [--runs N] [--faults F,...] [--faults-per-run K] [--set knob=value ...] [--release R] [--out DIR]`:
  the fault campaign of kcm.conformance.kafka.campaign, then its judgement (kcm.conformance.kafka.judge);
  `judge [--out DIR]` judges a campaign's recorded runs again; `diff [--out DIR] [--run RUN]` replays each run
  on kcm's implementation and compares the two (kcm.conformance.kafka.differential).

Exit codes: 0 done (campaign: everything held), 1 a violation (an invariant broken, or an acknowledged record
lost), 2 a user error (Java or Maven missing, a release kcm does not run, no cluster in DIR, a broker that would
not start: one line naming its log) or a campaign that decided nothing, 3 a line Kafka printed that kcm's
parser quarantined.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from kcm.impl.kafka import release as releases
from kcm.impl.kafka.admin import AdminError
from kcm.impl.kafka.cluster import KafkaCluster, KafkaError
from kcm.impl.zookeeper.ensemble import EnsembleError, ZooKeeperMissing
from kcm.spec.atomic_output import check_writable, write_output
from kcm.tools.errors import EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, UsageError, at_least
from kcm.tools.outputs import check_folder, default_out

_FAILURES = (releases.KafkaMissing, KafkaError, ZooKeeperMissing, EnsembleError, AdminError)


def register(subparsers: Any) -> None:
    kafka = subparsers.add_parser("kafka", help="run Apache Kafka (ZooKeeper mode) and judge it under faults")
    kafka.add_argument("action", choices=("fetch", "start", "stop", "status", "campaign", "judge", "diff"))
    kafka.add_argument("--release", default=releases.DEFAULT_RELEASE, choices=tuple(releases.RELEASES),
                       help=f"the Kafka release (default {releases.DEFAULT_RELEASE}; oldest "
                            f"{releases.OLDEST_RELEASE})")
    kafka.add_argument("--brokers", type=at_least(1), default=3, help="brokers (start; default 3)")
    kafka.add_argument("--dir", type=Path, default=None,
                       help=f"the cluster's configuration, data and logs (default {default_out('kafka')})")
    kafka.add_argument("--zk", default=None, metavar="HOSTS",
                       help="start: a ZooKeeper of your own (host:port,...) instead of one kcm starts")
    kafka.add_argument("--zk-servers", type=int, choices=(1, 3), default=1,
                       help="start: ZooKeeper servers kcm starts (default 1)")
    kafka.add_argument("--runs", type=at_least(1), default=1, help="campaign: runs, each a fresh cluster")
    kafka.add_argument("--faults", default=None, metavar="F,...",
                       help="campaign: the faults to draw from (default every one but leader-loss)")
    kafka.add_argument("--faults-per-run", type=at_least(0), default=5, help="campaign: faults per run")
    kafka.add_argument("--seed", type=at_least(0), default=0, help="campaign: the first run's seed")
    kafka.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                       help="campaign: unclean_election=true|false, min_isr=N (the data topic's settings)")
    kafka.add_argument("--out", type=Path, default=None,
                       help=f"campaign: where the runs and the judgement go (default {default_out('kafka-campaign')})")
    kafka.add_argument("--json", action="store_true", help="campaign, judge, diff: one JSON document")
    kafka.add_argument("--html", default=None, metavar="PAGE",
                       help="campaign, judge, diff: a report page (the judgement and the differential's pictures)")
    kafka.add_argument("--run", default=None, help="diff: one run of the campaign (run-NNN; default every one)")
    kafka.set_defaults(handler=cmd_kafka)


def cmd_kafka(args: argparse.Namespace) -> int:
    try:
        action: int = _ACTIONS[args.action](args)
    except _FAILURES as error:
        raise UsageError(str(error)) from error
    return action


def _directory(args: argparse.Namespace) -> Path:
    directory: Path = args.dir if args.dir is not None else default_out("kafka")
    return directory


def _fetch(args: argparse.Namespace) -> int:
    started = time.monotonic()
    releases.java()  # Maven and the brokers both run on it
    jars = releases.classpath(args.release)
    print(f"Kafka {args.release}: {len(jars.split(':'))} jars resolved ({time.monotonic() - started:.1f} s), "
          f"classpath in {releases.cache_dir() / (args.release + '.classpath')}")
    return EXIT_OK


def _start(args: argparse.Namespace) -> int:
    directory = _directory(args)
    check_folder(directory, str(directory))
    # Left running on purpose: `kcm kafka stop` ends it.
    cluster = KafkaCluster(directory, args.brokers, args.release, zk_hosts=args.zk, zk_servers=args.zk_servers,
                           detached=True)
    cluster.start()
    print(f"Kafka {args.release}: {args.brokers} broker{'s' if args.brokers > 1 else ''} serving at "
          f"{cluster.bootstrap} (ZooKeeper {cluster.zk_hosts})")
    print(f"logs under {directory}/broker-N/; stop it with: kcm kafka stop --dir {shlex.quote(str(directory))}")
    return EXIT_OK


def _stop(args: argparse.Namespace) -> int:
    directory = _directory(args)
    KafkaCluster.attach(directory).stop()
    print(f"stopped the Kafka cluster in {directory} (its data and logs stay there)")
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from kcm.impl.kafka.admin import Admin

    cluster = KafkaCluster.attach(_directory(args))
    statuses = cluster.status()
    controller = None
    if any(s.mode == "running" for s in statuses):
        try:
            controller = Admin(cluster).controller()
        except Exception:  # a ZooKeeper that is down leaves the column empty, not the table
            controller = None
    rows = [("broker", "port", "pid", "mode", "controller")]
    rows += [(str(s.broker_id), str(s.port), "-" if s.pid is None else str(s.pid), s.mode,
              "yes" if s.broker_id == controller else "") for s in statuses]
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(f"Kafka {cluster.release.version}, ZooKeeper {cluster.zk_hosts}")
    return EXIT_OK


def _campaign(args: argparse.Namespace) -> int:
    from kcm.conformance.kafka.campaign import CampaignError, plan_from_settings, run_campaign

    settings = {}
    for setting in args.settings:
        knob, sep, value = setting.partition("=")
        if not sep:
            raise UsageError(f"--set {setting}: expected KNOB=VALUE")
        settings[knob] = value
    fields: dict[str, Any] = {"runs": args.runs, "faults_per_run": args.faults_per_run, "first_seed": args.seed,
                              "release": args.release}
    if args.faults is not None:
        fields["faults"] = tuple(f for f in args.faults.split(",") if f)
    try:
        plan = plan_from_settings(settings, **fields)
    except CampaignError as error:
        raise UsageError(str(error)) from None
    out: Path = args.out if args.out is not None else default_out("kafka-campaign")
    check_folder(out, str(out))
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    if args.html:
        check_writable(args.html)  # the page comes after minutes of work: a place it cannot go is said now
    runs = run_campaign(plan, out, _say)
    return _judged(runs, out, args.json, started, _say, args.html)


def _judge(args: argparse.Namespace) -> int:
    from kcm.conformance.kafka.campaign import CampaignError, recorded_runs

    out: Path = args.out if args.out is not None else default_out("kafka-campaign")
    try:
        runs = recorded_runs(out)
    except CampaignError as error:
        raise UsageError(str(error)) from None

    return _judged(runs, out, args.json, time.monotonic(), _say, args.html)


def _judged(runs: Any, out: Path, as_json: bool, started: float, say: Any, html: str | None = None) -> int:
    from kcm.conformance.kafka.differential import compare
    from kcm.conformance.kafka.judge import judge

    say("judging the logs (pipeline ingest, check, Z3 step validation)")
    judgement = judge(runs, out)
    if html:
        _page(judgement.to_json(), [compare(run).to_json() for run in runs], html, out)
    if as_json:
        print(json.dumps(judgement.to_json(), indent=2))
    else:
        _print_judgement(judgement, time.monotonic() - started, out)
    if judgement.verdict == "violated":
        return EXIT_VIOLATED
    if judgement.ingest.get("quarantined"):
        return EXIT_INCOMPLETE
    return EXIT_OK if judgement.verdict == "holds" else EXIT_USAGE


def _print_judgement(judgement: Any, seconds: float, out: Path) -> None:
    ingest = judgement.ingest
    faults = judgement.faults()
    acked = sum(r.acked for r in judgement.runs)
    lost = sum(r.lost_count for r in judgement.runs)
    print(f"Kafka campaign: {len(judgement.runs)} runs, {sum(faults.values())} faults "
          f"({', '.join(f'{k} {n}' for k, n in sorted(faults.items()))}), {seconds:.0f} s")
    print(f"  logs: read {ingest['read']:,} = events {ingest['checked']:,} + skipped {ingest['skipped']:,} + "
          f"quarantined {ingest['quarantined']:,}")
    validation = judgement.validation
    print(f"  Z3 step validation: {validation.get('ok', 0)}/{validation.get('runs', 0)} runs explained, "
          f"{validation.get('steps', 0):,} steps")
    for step in validation.get("unexplained", [])[:5]:
        print(f"    unexplained: {step}")
    print(f"  client: {acked:,} records acknowledged (acks=all), {lost:,} not read back")
    for run in judgement.runs:
        for record in run.lost[:3]:
            print(f"    {run.name}: partition {record['partition']} offset {record['offset']} value "
                  f"{record['value']!r} read back as {record['read']!r}")
        for election in judgement.explained_losses.get(run.name, []):
            print(f"    {run.name}: NoCommittedDataLoss broken by the unclean election at {election['log']} "
                  f"({election['time']}): {election['partition']} leader {election['leader']} in epoch "
                  f"{election['leader_epoch']}, not in the ISR {list(election['isr_before'])} before it")
    width = max(len(name) for name in judgement.verdicts) if judgement.verdicts else 0
    for name, verdict in sorted(judgement.verdicts.items()):
        print(f"  {name.ljust(width)}  {verdict}")
    for violation in judgement.first_violations[:5]:
        print(f"  first violation: {violation['run']} event {violation['seq']}: {violation['invariant']}: "
              f"{violation['message']}")
    print(f"verdict: {judgement.verdict} (runs and logs in {out}, the judgement in {out / 'judgement.json'})")


def _diff(args: argparse.Namespace) -> int:
    from kcm.conformance.kafka.campaign import CampaignError, recorded_runs
    from kcm.conformance.kafka.differential import compare

    out: Path = args.out if args.out is not None else default_out("kafka-campaign")
    try:
        runs = [r for r in recorded_runs(out) if args.run is None or r.name == args.run]
    except CampaignError as error:
        raise UsageError(str(error)) from None
    if not runs:
        raise UsageError(f"--run {args.run}: no such run in {out}")
    comparisons = [compare(run) for run in runs]
    write_output(out / "diff.json", json.dumps([c.to_json() for c in comparisons], indent=2) + "\n")
    if args.html:
        from kcm.conformance.kafka.judge import JUDGEMENT

        try:
            judgement = json.loads((out / JUDGEMENT).read_text())
        except (OSError, ValueError):
            raise UsageError(f"--html: {out / JUDGEMENT} missing or unreadable: run kcm kafka judge first") from None
        _page(judgement, [c.to_json() for c in comparisons], args.html, out)
    if args.json:
        print(json.dumps([c.to_json() for c in comparisons], indent=2))
    else:
        for comparison in comparisons:
            _print_comparison(comparison)
        print(f"(all of it in {out / 'diff.json'})")
    return EXIT_OK


def _print_comparison(comparison: Any) -> None:
    print(f"{comparison.run}: {len(comparison.differences)} differences in (leader, leader epoch, ISR, "
          "controller epoch)")
    for partition, sequence in sorted(comparison.kafka.leadership.items()):
        ours = comparison.kcm.leadership.get(partition, [])
        print(f"  {partition}: Kafka wrote {len(sequence)}, kcm {len(ours)}")
    for difference in comparison.differences:
        print(f"  {difference.partition} {difference.kind}: Kafka {_shown(difference.kafka)} | "
              f"kcm {_shown(difference.kcm)}")
    for machine, counts in comparison.transition_differences().items():
        for transition, (kafka, kcm) in counts.items():
            print(f"  {machine.split('_')[0]} {transition}: Kafka {kafka}, kcm {kcm}")
    for skipped in comparison.not_replayed:
        print(f"  not replayed: {skipped}")


def _shown(entries: Any) -> str:
    return " ".join(f"({leader},{epoch},{list(isr)},c{controller})" for leader, epoch, isr, controller in entries) \
        or "-"


def _page(judgement: dict[str, Any], comparisons: list[dict[str, Any]], html: str, out: Path) -> None:
    from kcm.tools.report.kinds import kafka_page

    print(f"wrote {kafka_page(judgement, comparisons, Path(html), source=str(out))}", file=sys.stderr)


def _say(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


_ACTIONS = {"fetch": _fetch, "start": _start, "stop": _stop, "status": _status, "campaign": _campaign,
            "judge": _judge, "diff": _diff}
