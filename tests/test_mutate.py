"""The mutant catalogue: every mutant applies, the suite kills a sample (and spares an unchanged copy);
the full run is behind `long`."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.explore.finding import IMPLEMENTATION_ERROR, MODEL_STEP
from kcm.conformance.explore.mutants import (
    CATALOGUE,
    PROGRESS_MUTANTS,
    RM,
    Mutant,
    MutationError,
    apply,
    mutated_source,
    run_mutants,
)
from kcm.conformance.explore.oracles import ORACLES, Suite, oracle_of
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import PROPERTIES, Knobs
from kcm.spec.z3.validate import validate_events
from kcm.tools.cli import main

NAMED_TARGET = 0.90
# The mutants of the implementation's state tables, each with a simulator run (seed, steps) that takes the
# edited edge, and the invariant the checker names.
TABLE_MUTANTS = {
    "partition-table-drops-offline-to-online": (11, 200, "ValidPartitionTransitions"),
    "replica-table-allows-deleted-to-ineligible": (13, 800, "ValidReplicaTransitions"),
    "replica-table-drops-ineligible-to-offline": (11, 1400, "ValidReplicaTransitions"),
}


def test_the_catalogue_is_large_and_every_mutant_applies() -> None:
    assert len(CATALOGUE) >= 30
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)
    for mutant in CATALOGUE:
        assert mutant.new in mutated_source(mutant)


def test_a_mutant_that_no_longer_applies_is_an_error() -> None:
    with pytest.raises(MutationError, match="occurs 0 times"):
        mutated_source(Mutant("gone", RM, "ReplicaManager.produce", "no such text", "", ""))


def test_the_suite_kills_sample_mutants_and_spares_an_unchanged_one() -> None:
    sample = tuple(m for m in CATALOGUE if m.name in ("hw-as-max", "isr-order-election"))
    unchanged = Mutant("unchanged", RM, "ReplicaManager._maybe_advance_hw", "if candidate > replica.hw:",
                       "if candidate > replica.hw:", "")
    suite = Suite(examples=4, steps=10, seeds=(1,), sim_steps=300)
    results = {r.name: r for r in run_mutants((*sample, unchanged), processes=2, suite=suite)}
    assert results["hw-as-max"].killed and results["isr-order-election"].killed
    assert results["hw-as-max"].named, results["hw-as-max"].kills
    assert not results["unchanged"].killed, results["unchanged"].kills


def test_findings_belong_to_their_oracle_by_name() -> None:
    assert oracle_of("NoCommittedDataLoss") == oracle_of("HighWatermarkMonotonic/AcrossLeaders") == "invariant"
    assert {oracle_of(name) for name in PROPERTIES} == {"property"}
    assert oracle_of(MODEL_STEP) == "step check" and oracle_of(IMPLEMENTATION_ERROR) == "crash"


def test_every_progress_mutant_is_killed_by_a_named_invariant_or_property(capsys: pytest.CaptureFixture[str]) -> None:
    only = [arg for name in PROGRESS_MUTANTS for arg in ("--only", name)]
    main(["mutate", *only, "--examples", "4", "--steps", "10", "--seeds", "2", "--sim-steps", "600", "--json",
          "--progress", "none"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["progress_unnamed"] == [] and summary["named"] == len(PROGRESS_MUTANTS), summary["mutants"]
    assert set(summary["by_oracle"]) == set(ORACLES)
    assert summary["by_oracle"]["property"] >= 3, summary["by_oracle"]
    for mutant in summary["mutants"]:
        assert mutant["by"].startswith(("invariant:", "property:")), mutant


def _first_findings(name: str) -> tuple[tuple[str, int] | None, int | None]:
    """In a process of its own: the mutant applied, a simulator run, the checker's first violation and the
    first step the Z3 validator cannot explain."""
    apply(next(m for m in CATALOGUE if m.name == name))
    seed, steps, _ = TABLE_MUTANTS[name]
    events: list[Event] = []
    Simulator(seed, Knobs(), SimConfig(), events.append).run(steps)
    violations = InvariantChecker().check_all(events).violations
    failure = validate_events(events).failure
    return ((violations[0].invariant, violations[0].seq) if violations else None,
            None if failure is None else failure.seq)


def test_mutants_of_the_implementations_tables_are_caught_by_the_checker_and_by_validation_alone() -> None:
    with multiprocessing.get_context("fork").Pool(2, maxtasksperchild=1) as pool:
        found = dict(zip(TABLE_MUTANTS, pool.map(_first_findings, TABLE_MUTANTS), strict=True))
    for name, (checked, validated) in found.items():
        assert checked is not None and checked[0] == TABLE_MUTANTS[name][2], (name, checked)
        assert validated == checked[1], (name, validated)


def test_kcm_mutate_rejects_an_unknown_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutate", "--only", "nope"]) == 2
    assert "unknown mutant 'nope'" in capsys.readouterr().err


@pytest.mark.long
def test_full_mutation_run_meets_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["mutate", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert summary["kill_rate"] >= 0.95, summary["survivors"]
    assert summary["progress_unnamed"] == [], summary["progress_unnamed"]
    # The target of issue 25, met (docs/mutation.md): the exit code says so too.
    assert summary["named_rate"] >= NAMED_TARGET, summary["unnamed"]
    assert code == 0
