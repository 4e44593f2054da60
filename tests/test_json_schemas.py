"""The JSON Schemas of the `--json` documents (tools/schemas/, kcm.tools.json_schemas): each is a draft-07 schema,
every command with `--json` has one, and what each command prints validates against its own, on small inputs.

In the default suite: the commands that run in seconds without TLC, Spark, ZooKeeper or Kafka; `diff` and the
Kafka judgement as their code builds them from made-up sides and runs; `pipeline report` on a folder that
`pipeline generate` and `check` wrote with Spark's scheduling done in this process. Under `tlc`: check, review,
hunt, validate --tlc and diff on two design folders. Under `long`: the pipeline and `kafka judge` on local Spark.
Under `kafka`: a fault campaign on Apache Kafka."""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest

from kcm.conformance.design_diff import Side, SideResult, compare
from kcm.conformance.design_diff import to_json as diff_to_json
from kcm.conformance.kafka.campaign import FaultRecord, RunRecord
from kcm.conformance.kafka.differential import Election
from kcm.conformance.kafka.judge import Judgement
from kcm.conformance.pipeline import jobs
from kcm.conformance.review import Cell, RowResult
from kcm.spec.designs import COLUMNS, VARIANTS
from kcm.spec.verdicts import HOLDS, VIOLATED
from kcm.spec.vocabulary import INVARIANTS, PROPERTIES, Knobs
from kcm.tools.cli import _build_parser, main
from kcm.tools.json_schemas import DocumentError, UnknownSchemaError, names, schema, validate

DATA = Path(__file__).parent / "data"
RECORDED_RUN = DATA / "kafka" / "campaign-run"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"


@pytest.fixture(autouse=True)
def _outputs_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Default outputs (and the result cache) in the test's folder; no GitHub Actions output on stdout."""
    monkeypatch.setenv("KCM_OUT", str(tmp_path / "kcm-out"))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


def printed(capsys: pytest.CaptureFixture[str], argv: list[str], codes: Iterable[int] = (0,)) -> Any:
    """The JSON document `kcm ARGV` prints, its exit code one of `codes`."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code in tuple(codes), f"kcm {' '.join(argv)} exited {code}: {err}"
    return json.loads(out)


def valid(name: str, document: Any) -> Any:
    """Validated as the JSON text it is printed as (tuples become arrays), and returned."""
    parsed = json.loads(json.dumps(document))
    validate(name, parsed)
    return parsed


# -- the schemas themselves --------------------------------------------------------------------------------


def test_every_schema_is_a_draft_07_schema_with_its_identity() -> None:
    assert names(), "no schema found in kcm.tools's package data"
    for name in names():
        document = schema(name)
        fastjsonschema.compile(document)  # JsonSchemaDefinitionException for a schema that is not one
        assert document["$schema"] == DRAFT_07, name
        assert document["$id"] == f"https://kcm.dev/schemas/{name}.schema.json", name
        assert document["title"] and document["description"], name


def _prefixed(node: Any) -> Any:
    """A part of spec/trace/schema.json with its references renamed as a command's schema holds them."""
    if isinstance(node, dict):
        return {key: value.replace("#/definitions/", "#/definitions/trace_") if key == "$ref" else _prefixed(value)
                for key, value in node.items()}
    if isinstance(node, list):
        return [_prefixed(value) for value in node]
    return node


def test_a_counterexample_in_a_document_is_an_event_as_the_trace_format_has_it() -> None:
    trace = json.loads((Path(__file__).parents[1] / "spec" / "trace" / "schema.json").read_text())
    holding = [name for name in names() if "trace_event" in schema(name).get("definitions", {})]
    assert {"check", "hunt", "prove", "review"} <= set(holding)
    for name in holding:
        definitions = schema(name)["definitions"]
        event = {k: v for k, v in definitions["trace_event"].items() if k != "description"}
        assert event == _prefixed({k: v for k, v in trace.items()
                                   if k not in ("$schema", "title", "description", "definitions")}), name
        for key, value in trace["definitions"].items():
            if f"trace_{key}" in definitions:
                assert definitions[f"trace_{key}"] == _prefixed(value), (name, key)


def _json_commands() -> list[str]:
    """Every command whose parser takes --json, a subcommand's as `command-sub` (`pipeline-report`)."""
    found: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
        if path and any("--json" in action.option_strings for action in parser._actions):
            found.append("-".join(path))

    walk(_build_parser(), [])
    return sorted(found)


def test_every_command_with_a_json_option_has_a_schema_and_every_schema_a_command() -> None:
    commands = _json_commands()
    assert {"check", "check-trace", "kafka", "pipeline-report", "prove", "verify"} <= set(commands)
    known = names()
    for command in commands:
        assert command in known or any(name.startswith(f"{command}-") for name in known), \
            f"kcm {command.replace('-', ' ')} has --json and no schema in tools/schemas/"
    # `kafka` is one parser whose actions print different documents: one schema each.
    assert {name for name in known if name.startswith("kafka-")} == {"kafka-campaign", "kafka-judge", "kafka-diff"}
    for name in known:
        assert name in commands or any(name.startswith(f"{c}-") for c in commands), f"{name}: of no command"


def test_a_document_that_breaks_its_schema_is_one_clear_error() -> None:
    with pytest.raises(DocumentError) as missing:
        validate("mutate", {"killed": 1})
    assert str(missing.value).startswith("not a valid mutate document (mutate.schema.json): the top level: ")
    assert "must contain" in missing.value.reason
    with pytest.raises(UnknownSchemaError, match="no JSON schema named 'nope'"):
        validate("nope", {})


# -- the commands of the default suite ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "trace.jsonl"
    assert main(["sim", "--seed", "7", "--steps", "300", "--out", str(path)]) == 0
    return path


def test_check_trace(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = valid("check-trace", printed(capsys, ["check-trace", str(trace), "--json"]))
    assert document["events"] > 300 and not document["violations"]


def test_validate_by_z3(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = valid("validate", printed(capsys, ["validate", str(trace), "--json", "--progress", "none"]))
    assert document["ok"] and document["first_unexplained"] is None


def test_replay_and_a_replay_document_missing_its_verdict(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = valid("replay", printed(capsys, ["replay", str(trace), "--json"]))
    assert document["verdict"] == "conforms"
    del document["verdict"]
    with pytest.raises(DocumentError, match=r"replay\.schema\.json\): the top level: must contain"):
        validate("replay", document)
    with pytest.raises(DocumentError, match="verdict: must be one of"):
        validate("replay", {**document, "verdict": "fine"})


def test_verify_of_the_simulation_and_a_stage_row_missing_its_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = valid("verify", printed(capsys, ["verify", "--only", "simulation", "--seeds", "2", "--steps", "200",
                                                "--out", str(tmp_path / "verify"), "--json", "--progress", "none"]))
    assert document["result"] == HOLDS and document["seeds"] == 2
    del document["stages"][0]["verdict"]
    with pytest.raises(DocumentError, match=r"stages\[0\]: must contain"):
        validate("verify", document)


def test_prove_the_universal_proofs_and_a_bounded_search(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proofs = valid("prove", printed(capsys, ["prove", "--only", "proofs", "--brokers", "2", "--json",
                                             "--progress", "none"]))
    assert proofs and {row["result"] for row in proofs} == {HOLDS}
    [bmc] = valid("prove", printed(capsys, ["prove", "--bmc", "2", "--json", "--progress", "none",
                                            "--out", str(tmp_path / "bmc.jsonl")]))
    assert bmc["result"] == "holds to depth 2"


def test_conform(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = valid("conform", printed(capsys, ["conform", "--examples", "2", "--steps", "5", "--json",
                                                 "--out", str(tmp_path / "conform"), "--progress", "none"]))
    assert document["examples"] == 2


def test_mutate(capsys: pytest.CaptureFixture[str]) -> None:
    document = valid("mutate", printed(capsys, ["mutate", "--only", "leader-epoch-ge", "--processes", "1",
                                                "--examples", "1", "--steps", "5", "--seeds", "1", "--sim-steps",
                                                "50", "--json", "--progress", "none"], codes=(0, 1)))
    assert [m["name"] for m in document["mutants"]] == ["leader-epoch-ge"]


def _diff_document() -> dict[str, Any]:
    """The delta of two made-up review sides of one row: HEAD breaks NoCommittedDataLoss and grows the model."""
    variant = next(v for v in VARIANTS if v.label == "truncation=hw")

    def row(states: int, broken: bool) -> dict[str, Any]:
        cells = {name: Cell(name, HOLDS, states, 12.5, depth=14) for name in COLUMNS}
        if broken:
            cells["NoCommittedDataLoss"] = Cell("NoCommittedDataLoss", VIOLATED, 616, 7.7, trace_length=9,
                                                trace="truncation-hw-NoCommittedDataLoss.jsonl")
        return {**RowResult(variant, cells, runs=1 + broken, seconds=20.0).to_json(), "design": "designs/hw"}

    def side(given: str, commit: str, document: dict[str, Any]) -> SideResult:
        return SideResult(Side(given, commit, []), {variant.label: document}, cached=1, computed=0)

    delta = compare(side("HEAD~1", "a" * 40, row(1260, False)), side("HEAD", "b" * 40, row(1300, True)))
    return diff_to_json(delta, 3.5)


def test_diff_of_made_up_sides_and_one_missing_what_it_breaks() -> None:
    document = valid("diff", _diff_document())
    assert document["breaks"] and document["cells_changed"] and document["sizes_changed"]
    del document["breaks"]
    with pytest.raises(DocumentError, match="must contain"):
        validate("diff", document)


def _recorded_campaign(folder: Path) -> Path:
    """A campaign folder holding the run of tests/data/kafka/campaign-run (Kafka 3.9.2), as the campaign wrote it."""
    run = folder / "run-007"
    shutil.copytree(RECORDED_RUN, run)
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "folder": str(run)}))
    return folder


def test_kafka_diff_of_a_recorded_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _recorded_campaign(tmp_path / "campaign")
    [comparison] = valid("kafka-diff", printed(capsys, ["kafka", "diff", "--out", str(out), "--json"]))
    assert comparison["run"] == "run-007" and set(comparison["leadership"]) == {"kcm-data-0", "kcm-data-1"}
    del comparison["leadership"]
    with pytest.raises(DocumentError, match=r"\[0\]: must contain"):
        validate("kafka-diff", [comparison])


def test_a_kafka_judgement_as_its_code_builds_it() -> None:
    record = RunRecord("run-001", 1, "/tmp/run-001", "3.9.2", {"min.insync.replicas": "1"},
                       [FaultRecord("leader-loss", 2, "leader", 11.3), FaultRecord("leader-loss", 3, "follower",
                                                                                   12.0, "restarted", 1)],
                       acked=10, read_back=9, lost=[{"partition": 0, "offset": 3, "value": "v3", "read": None}],
                       lost_count=1, send_errors={"NotEnoughReplicas": 2}, calm=True, seconds=60.0)
    election = Election("kcm-data-0", 3, 2, (2,), "broker-3/state-change.log:12", "2025-01-01 10:00:00,000")
    verdicts = {name: HOLDS for name in (*INVARIANTS, *PROPERTIES)} | {"NoCommittedDataLoss": VIOLATED}
    judgement = Judgement([record], jobs.Counts(read=10, checked=6, skipped=4).to_json(), verdicts,
                          [{"run": "run-001", "seq": 5, "invariant": "NoCommittedDataLoss", "message": "lost"}],
                          {"sample": 1.0, "runs": 1, "ok": 1, "steps": 5, "unexplained": []},
                          [{"file": "broker-1/state-change.log", "line": 3, "reason": "unparsed", "run": "run-001"}],
                          {"run-001": [asdict(election)]})
    for name in ("kafka-campaign", "kafka-judge"):
        assert valid(name, judgement.to_json())["verdict"] == VIOLATED


class _Partitions:
    """Spark's RDD as `jobs.generate` and `jobs.check` use it, its tasks run here, one partition after another."""

    def __init__(self, parts: list[list[Any]]) -> None:
        self.parts = parts

    def mapPartitions(self, task: Callable[[Iterator[Any]], Iterable[Any]]) -> _Partitions:
        return _Partitions([list(task(iter(part))) for part in self.parts])

    def getNumPartitions(self) -> int:
        return len(self.parts)

    def collect(self) -> list[Any]:
        return [row for part in self.parts for row in part]


class _Tracker:
    def getActiveStageIds(self) -> list[int]:
        return []

    def getStageInfo(self, _: int) -> None:
        return None


class _Context:
    defaultParallelism = 1

    def parallelize(self, items: Iterable[Any], numSlices: int) -> _Partitions:
        listed = list(items)
        return _Partitions([listed[i::numSlices] for i in range(numSlices)])

    def statusTracker(self) -> _Tracker:
        return _Tracker()


class _InProcessSpark:
    sparkContext = _Context()


def test_pipeline_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spark: Any = _InProcessSpark()
    jobs.generate(spark, 2, 100, Knobs(), tmp_path / "corpus")
    jobs.check(spark, tmp_path / "corpus", tmp_path / "checked", validate_sample=1.0)
    document = valid("pipeline-report", printed(capsys, ["pipeline", "report", "--in", str(tmp_path / "checked"),
                                                         "--json"]))
    assert document["runs"] == 2 and document["validation"]["ok"] == 2
    del document["records"]
    with pytest.raises(DocumentError, match="must contain"):
        validate("pipeline-report", document)


# -- TLC -------------------------------------------------------------------------------------------------------


@pytest.mark.tlc
def test_check_an_invariant_and_a_liveness_property(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = valid("check", printed(capsys, ["check", "--model", "kafka1211", "--json", "--progress", "none",
                                            "--out", str(tmp_path / "check") + "/"], codes=(1,)))
    assert found["result"] == VIOLATED and found["explanation"]
    lasso = valid("check", printed(capsys, ["check", "--liveness", "--model", "livenessnofailover", "--heap", "1024",
                                            "--json", "--progress", "none", "--out", str(tmp_path / "lasso.jsonl")],
                                   codes=(1,)))
    assert lasso["properties"][0]["loop_action"]


@pytest.mark.tlc
def test_review_a_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = valid("review", printed(capsys, ["review", "--row", "truncation=hw", "--json", "--progress", "none",
                                                "--out", str(tmp_path / "review")]))
    assert document["rows"][0]["verdict"] == "as expected"


@pytest.mark.tlc
def test_hunt_with_and_without_a_counterexample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = valid("hunt", printed(capsys, ["hunt", "--set", "truncation=hw", "--budget", "120", "--cores", "1",
                                           "--json", "--progress", "none", "--out", str(tmp_path / "found")],
                                  codes=(1,)))
    assert found["result"] == VIOLATED
    none = valid("hunt", printed(capsys, ["hunt", "--model", "kafka1211", "--invariant", "TypeOK", "--budget", "120",
                                          "--cores", "1", "--json", "--progress", "none",
                                          "--out", str(tmp_path / "none")]))
    assert none["result"] == HOLDS


@pytest.mark.tlc
def test_validate_by_tlc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "short.jsonl"
    assert main(["sim", "--seed", "1", "--steps", "40", "--out", str(trace)]) == 0
    capsys.readouterr()
    document = valid("validate", printed(capsys, ["validate", "--tlc", str(trace), "--json", "--progress", "none"]))
    assert document["engine"] == "tlc" and document["accepted"]


# -- Spark (long); the Kafka campaign's document is validated by tests/test_kafka.py ---------------------


@pytest.mark.long
def test_the_pipeline_on_local_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus, checked = str(tmp_path / "corpus"), str(tmp_path / "checked")
    spark = ["--master", "local[2]", "--progress", "none"]
    assert main(["pipeline", "generate", "--runs", "2", "--steps", "100", "--out", corpus, *spark]) == 0
    assert main(["pipeline", "check", "--in", corpus, "--out", checked, "--validate-sample", "all", *spark]) == 0
    capsys.readouterr()
    document = valid("pipeline-report", printed(capsys, ["pipeline", "report", "--in", checked, "--json"]))
    assert document["runs"] == 2


@pytest.mark.long
def test_kafka_judge_of_a_recorded_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _recorded_campaign(tmp_path / "campaign")
    document = valid("kafka-judge", printed(capsys, ["kafka", "judge", "--out", str(out), "--json"]))
    assert document["runs"][0]["name"] == "run-007"
