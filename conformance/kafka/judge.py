"""A Kafka campaign judged: every run's broker logs through the pipeline's ingest and check (every invariant, the
valid-previous-state tables, Z3 step validation of every run), beside the client's view of each run (every
acknowledged record read back), in one verdict. A record acknowledged with `acks=all` and not read back is
committed data lost (`AcknowledgedRecordsRead`), whatever the logs say; a line of Kafka's that the parser
quarantines makes the verdict `unknown`, since the check then judged less than Kafka printed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from kcm.conformance.kafka.campaign import DATA_TOPIC, RunRecord
from kcm.conformance.kafka.differential import kafka_events, unclean_elections
from kcm.spec.atomic_output import write_output
from kcm.spec.verdicts import HOLDS, UNKNOWN, UNOBSERVED, VIOLATED

CLIENT_CHECK: Final = "AcknowledgedRecordsRead"
# A record acknowledged with acks=all is committed: one not read back is committed data lost.
LOSS: Final = "NoCommittedDataLoss"
JUDGEMENT: Final = "judgement.json"


@dataclass
class Judgement:
    runs: list[RunRecord]
    ingest: dict[str, Any]  # read, checked, skipped, quarantined, by reason
    verdicts: dict[str, str]  # invariant or property -> holds / violated / unobserved
    first_violations: list[dict[str, Any]]
    validation: dict[str, Any]  # Z3: runs explained of runs, steps, the unexplained steps
    quarantine: list[dict[str, Any]] = field(default_factory=list)
    # Per run with lost records: the unclean elections of its partitions that lost them (the step to blame).
    explained_losses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def client(self) -> str:
        if not self.runs:
            return UNOBSERVED
        return VIOLATED if any(r.lost_count for r in self.runs) else HOLDS

    @property
    def verdict(self) -> str:
        if self.client == VIOLATED or VIOLATED in self.verdicts.values():
            return VIOLATED
        if self.ingest.get("quarantined") or self.validation.get("unexplained"):
            return UNKNOWN
        return HOLDS if HOLDS in self.verdicts.values() else UNOBSERVED

    def faults(self) -> Counter[str]:
        return Counter(f.kind for r in self.runs for f in r.faults if f.step == 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "client": self.client, "ingest": self.ingest, "verdicts": self.verdicts,
            "first_violations": self.first_violations, "validation": self.validation,
            "faults": dict(sorted(self.faults().items())), "quarantine": self.quarantine[:50],
            "explained_losses": self.explained_losses,
            "runs": [r.to_json() for r in self.runs],
        }


def judge(runs: Sequence[RunRecord], out: Path, master: str = "local[2]",
          progress: Callable[[str, int, int], None] | None = None) -> Judgement:
    """Ingests and checks the runs' logs under `out` (`corpus/`, `checked/`), writes `judgement.json`."""
    from kcm.conformance.pipeline import jobs as pl
    from kcm.conformance.pipeline.ingest import ingest
    from kcm.conformance.pipeline.session import spark_session

    logs = [str(path) for run in runs for path in run.log_files()]
    corpus, checked = out / "corpus", out / "checked"
    spark = spark_session(master, shuffle_partitions=4)
    try:
        shown = progress or pl.no_progress
        counts = ingest(spark, logs, [], corpus, progress=shown)
        result = pl.check(spark, corpus, checked, validate_sample=1.0, progress=shown)
    finally:
        spark.stop()
    summary = result.summary
    ingested = {**counts.to_json(), "skipped_by_reason": _folded(counts.skipped_by_reason)}
    verdicts = _verdicts(summary["verdicts"])
    if any(r.lost_count for r in runs):
        # The logs hold no records, so the checker leaves this unobserved; the client sees what was lost.
        verdicts[LOSS] = VIOLATED
    elif any(r.acked for r in runs):
        verdicts[LOSS] = HOLDS
    judgement = Judgement(list(runs), ingested, verdicts, summary["first_violations"], summary["validation"],
                          pl.read_quarantine(corpus), {r.name: _blamed(r) for r in runs if r.lost_count})
    write_output(out / JUDGEMENT, json.dumps(judgement.to_json(), indent=2) + "\n")
    return judgement


def _blamed(run: RunRecord) -> list[dict[str, Any]]:
    lost = {f"{DATA_TOPIC}-{record['partition']}" for record in run.lost}
    return [asdict(e) for e in unclean_elections(kafka_events(run)) if e.partition in lost]


def _verdicts(by_run: dict[str, dict[str, int]]) -> dict[str, str]:
    return {name: VIOLATED if counts.get("violated") else HOLDS if counts.get("holds") else UNOBSERVED
            for name, counts in by_run.items()}


def _folded(skipped: dict[str, int]) -> dict[str, int]:
    # A stack trace's reason names the line it follows: one reason for them all.
    folded: Counter[str] = Counter()
    for reason, count in skipped.items():
        folded["skipped on purpose: stack trace" if "stack trace of line" in reason else reason] += count
    return dict(folded.most_common())
