"""The mutant catalogue: every mutant applies, the suite kills a sample (and spares an unchanged copy);
the full run is behind `long`."""

from __future__ import annotations

import json

import pytest

from kcm.conformance.explore.mutants import CATALOGUE, RM, Mutant, MutationError, mutated_source, run_mutants
from kcm.tools.cli import main


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
    unchanged = Mutant("unchanged", RM, "ReplicaManager._maybe_advance_hw", "candidate = min(own, lowest)",
                       "candidate = min(own, lowest)", "")
    results = {r.name: r for r in run_mutants((*sample, unchanged), processes=2, examples=4, steps=10)}
    assert results["hw-as-max"].killed and results["isr-order-election"].killed
    assert not results["unchanged"].killed, results["unchanged"].by


def test_kcm_mutate_rejects_an_unknown_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutate", "--only", "nope"]) == 2
    assert "unknown mutant 'nope'" in capsys.readouterr().err


@pytest.mark.long
def test_full_mutation_run_meets_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["mutate", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["kill_rate"] >= 0.95, summary["survivors"]
