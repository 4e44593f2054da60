"""The data proof (spec/z3/data.py, docs/z3.md "The data proof"): every obligation proved for N = 2, the
unsafe designs failing at their truncation action, and `kcm prove --only data`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from kcm.spec.tlc.modelcheck import check_model, spec_dir
from kcm.spec.verdicts import HOLDS, VIOLATED
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.data import DESIGNS, IMPLIED, PROPERTIES, TLA_LEMMAS, DataProof, Obligation
from kcm.tools import cli


@pytest.fixture(scope="module")
def safe() -> DataProof:
    # the CLI's attempts and budgets: z3 resource units, so what is proved does not depend on the machine's
    # load; the tracked attempt first, far below its budget, so not on the tests that ran before either
    return DataProof(2, "kip320")


def test_the_initial_states_satisfy_every_lemma(safe: DataProof) -> None:
    assert safe.ind_init().result == HOLDS


ACTIONS = ["Produce", "IsrShrink", "HwCheckpoint", "LeaderAndIsr", "BrokerCrash", "BrokerRestart", "FetchRound",
           "TruncationRound", "LeaderElection"]


def test_the_obligations_cover_every_action(safe: DataProof) -> None:
    assert safe.actions() == ACTIONS


@pytest.mark.parametrize("action", ACTIONS)
def test_every_action_preserves_the_invariant(safe: DataProof, action: str) -> None:
    result = safe.ind_next(action)
    assert result.result == HOLDS, result.cti or result.unproved


@pytest.mark.parametrize("lemma", list(IMPLIED))
def test_each_implied_lemma_follows_from_the_lemmas_it_names(safe: DataProof, lemma: str) -> None:
    assert lemma not in IMPLIED[lemma] and not set(IMPLIED[lemma]) & set(IMPLIED)
    assert safe.implied(lemma).result == HOLDS


@pytest.mark.parametrize("prop", ["NoCommittedDataLoss", "ReplicaLogsAgree", "HighWatermarkMonotonic"])
def test_the_invariant_gives_the_property(safe: DataProof, prop: str) -> None:
    assert safe.ind_prop(prop).result == HOLDS


@pytest.mark.parametrize(("design", "action"), [("hw", "LeaderAndIsr"), ("kip101", "TruncationRound"),
                                                ("kip279", "TruncationRound")])
def test_an_unsafe_design_breaks_the_lemmas_where_it_truncates(design: str, action: str) -> None:
    assert DESIGNS[design].truncation_action == action
    result = DataProof(2, design).ind_next(action)
    assert result.result == VIOLATED and result.cti is not None
    assert result.cti["action"] == action
    # the counterexample is a readable pair of states: per broker its log as (epoch, record) pairs
    before, after = result.cti["before"], result.cti["after"]
    assert set(before) == set(after) and {"broker 0", "broker 1", "node", "committed"} <= set(before)
    assert all(len(entry) == 2 for entry in before["broker 0"]["log"])


def test_prove_only_data_prints_a_row_per_obligation(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def first_two(self: DataProof) -> Iterator[Callable[[], Obligation]]:
        yield self.ind_init
        yield lambda: self.ind_next("HwCheckpoint")

    monkeypatch.setattr(DataProof, "obligations", first_two)
    code = cli.main(["prove", "--only", "data", "--brokers", "2", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [row["property"] for row in rows] == ["data: IndInit", "data: IndNext: HwCheckpoint"]
    assert {row["group"] for row in rows} == {"data"} and {row["result"] for row in rows} == {HOLDS}


def test_prove_only_data_stops_at_the_first_counterexample_to_induction(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["prove", "--only", "data", "--brokers", "2", "--set", "truncation=hw", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [row["result"] for row in rows] == [HOLDS] * (len(rows) - 1) + [VIOLATED]
    assert rows[-1]["property"] == "data: IndNext: LeaderAndIsr"
    left = len(ACTIONS) - ACTIONS.index("LeaderAndIsr") - 1 + len(IMPLIED) + len(PROPERTIES)
    assert rows[-1]["detail"].endswith(f"the {left} obligations after it not run (--full runs them)")


@pytest.mark.long
def test_three_brokers_every_obligation_holds() -> None:
    proof = DataProof(3, "kip320")
    rows = [obligation() for obligation in proof.obligations()]
    assert len(rows) == 1 + len(ACTIONS) + len(IMPLIED) + len(PROPERTIES)
    assert {row.name: row.result for row in rows} == {row.name: HOLDS for row in rows}


@pytest.mark.tlc
def test_tlc_checks_the_data_lemmas_on_ci() -> None:
    """MCci.cfg lists the data lemmas of spec/KafkaInvariants.tla among its invariants: TLC agrees."""
    config = (spec_dir() / "MCci.cfg").read_text()
    assert all(f"    {name}\n" in config for name in TLA_LEMMAS)
    outcome = check_model("ci", Knobs(), heap_mb=1024)
    assert outcome.result.violated is None and outcome.result.distinct_states > 100_000
