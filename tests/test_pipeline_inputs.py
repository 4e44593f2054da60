"""`kcm pipeline`'s input errors are one line and exit 2, said before Spark starts (tools/pipeline.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.pipeline import jobs as pl
from kcm.tools import cli
from kcm.tools import pipeline as stages
from kcm.tools.errors import EXIT_USAGE


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """These inputs are refused before Spark starts: a stage that reaches it fails the test."""
    def refused(*_: Any) -> Any:
        pytest.fail("Spark was started")

    monkeypatch.setattr(stages, "_session", refused)


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "corpus" / pl.EVENTS).mkdir(parents=True)
    for broker in ("broker-1", "broker-2"):  # two brokers' logs of one name: two runs
        (tmp_path / broker).mkdir()
        (tmp_path / broker / "state-change.log").write_text("")
    places = {name: tmp_path / name for name in ("a-file", "empty", "corpus", "missing", "out")}
    return {**places, "log-1": tmp_path / "broker-1" / "state-change.log",
            "log-2": tmp_path / "broker-2" / "state-change.log"}


# (the stage's arguments, with {name} for a path of `places`; what the error says after "kcm: error: ")
CASES = [
    ("check --in {missing} --out {out}", "--in {missing}: no such directory"),
    ("check --in {a-file} --out {out}", "--in {a-file}: not a directory"),
    ("check --in {empty} --out {out}", "--in {empty}: not a pipeline directory (no events/ folder, no Parquet files)"),
    ("check --in {corpus} --out {a-file}", "--out {a-file}: exists and is not a directory"),
    ("ingest --out {out}", "nothing to ingest: give --kafka-log or --trace files"),
    ("ingest --kafka-log {missing} --out {out}", "--kafka-log {missing}: no such file"),
    ("ingest --kafka-log {empty} --out {out}", "--kafka-log {empty}: a directory, not a file"),
    ("ingest --trace {a-file} {missing} --out {out}", "--trace {missing}: no such file"),
    ("ingest --trace {a-file} --out {a-file}", "--out {a-file}: exists and is not a directory"),
    ("ingest --kafka-log {log-1} {log-2} --trace {log-1} --out {out}", "{log-1}: given twice (as {log-1})"),
    # Unwritable: refused before Spark starts (it used to fail after 15 s of it).
    ("ingest --trace {log-1} --out /proc/kcm-out", "/proc/kcm-out: cannot write: No such file or directory"),
    ("check --in {corpus} --out /proc/kcm-out", "/proc/kcm-out: cannot write: No such file or directory"),
    ("check --in {corpus} --out {corpus}", "--out {corpus}: holds --in {corpus}, and --out is replaced whole: give "
     "another folder"),
    ("generate --runs 1 --steps 10 --out {a-file}", "--out {a-file}: exists and is not a directory"),
    ("report --in {empty}", "{empty}: no summary.json (run `kcm pipeline check` first)"),
]


@pytest.mark.parametrize(("arguments", "message"), CASES, ids=[c[0].split(" {")[0] + " " + c[1][:24] for c in CASES])
@pytest.mark.usefixtures("no_spark")
def test_an_input_error_is_one_line_before_spark_starts(arguments: str, message: str, places: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    names = {name: str(path) for name, path in places.items()}
    code = cli.main(["pipeline", *arguments.format(**names).split()])
    captured = capsys.readouterr()
    assert (code, captured.out, captured.err) == (EXIT_USAGE, "", f"kcm: error: {message.format(**names)}\n")
    assert not places["out"].exists()


@pytest.mark.parametrize("stage", ["ingest --trace {log-1}", "check --in {corpus}", "generate --runs 1 --steps 5"])
@pytest.mark.usefixtures("no_spark")
def test_an_out_another_kcm_writes_is_refused_before_spark_starts(stage: str, places: dict[str, Path],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from kcm.spec.atomic_output import claimed_folder, claimed_in_place

    names = {name: str(path) for name, path in places.items()}
    claim = claimed_folder if stage.startswith("check") else claimed_in_place
    with claim(places["out"]):  # another kcm process, as far as the lock can tell
        code = cli.main(["pipeline", *stage.format(**names).split(), "--out", names["out"]])
    captured = capsys.readouterr()
    assert (code, captured.err) == (EXIT_USAGE, f"kcm: error: {names['out']}: another kcm process is writing it\n")
