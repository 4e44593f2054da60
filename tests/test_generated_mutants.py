"""The generated mutants (conformance/explore/generated_mutants.py): the AST pass is deterministic and its sample
stratified, every operator makes compilable source that differs from the original, and the judge both kills (by
a named oracle) and spares (a mutant of a line no oracle reaches). The 200-mutant measure is a benchmark
(tools/bench/generated_mutants.py), not a test."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from collections import Counter

import pytest

from kcm.conformance.explore import generated_mutants as generated
from kcm.conformance.explore.generated_mutants import (
    CORE_MODULES,
    EQUIVALENT,
    NOT_MUTATED,
    OPERATORS,
    Score,
    generate,
    module_mutants,
    operator_of,
    run_generated,
    short,
)
from kcm.conformance.explore.mutants import Mutant, _resolve, mutated_source
from kcm.conformance.explore.oracles import NAMED, Suite
from kcm.tools.cli import main
from kcm.tools.json_schemas import validate

TINY = Suite(seeds=(1,), sim_steps=300, validated=0, examples=4, steps=10)
# Design.high_watermark's outer min as a max: the catalogue's hw-as-max, made mechanically.
KNOWN_KILLED = "design:Design.high_watermark:minmax:0"
# The record of a partition transition the table refuses (traces carry it): the correct controller never asks
# for one, so no oracle runs that line.
UNREACHED = "partition_state_machine:PartitionStateMachine.handle:delete:1"


@pytest.fixture(scope="module")
def everything() -> list[Mutant]:
    return generate()


def test_generation_is_deterministic_sorted_and_large(everything: list[Mutant]) -> None:
    assert len(everything) >= 200
    ids = [m.name for m in everything]
    assert len(set(ids)) == len(ids)
    assert ids == [m.name for m in generate()]
    assert everything == sorted(everything, key=generated._key)
    assert {short(m.module) for m in everything} == {short(m) for m in CORE_MODULES}
    for mutant in everything:
        module, target, operator, ordinal = mutant.name.split(":")
        assert (qualified := generated.qualified(module)) == mutant.module and target == mutant.target
        assert operator in OPERATORS and ordinal.isdigit() and mutant.idea.startswith("line "), mutant.name
        assert qualified in CORE_MODULES


def test_the_sample_is_deterministic_and_stratified_by_module(everything: list[Mutant]) -> None:
    sample = generate(limit=120, seed=3)
    assert len(sample) == 120 and sample == generate(limit=120, seed=3)
    assert sample != generate(limit=120, seed=4)
    assert {m.name for m in sample} <= {m.name for m in everything}
    total, drawn = Counter(m.module for m in everything), Counter(m.module for m in sample)
    for module, count in total.items():
        assert abs(drawn[module] - 120 * count / len(everything)) < 1, (module, drawn[module], count)
    assert generate(limit=len(everything) + 5) == everything


def test_every_operator_makes_compilable_source_that_differs_from_the_original(
        everything: list[Mutant]) -> None:
    seen = Counter(operator_of(m) for m in everything)
    assert set(seen) == set(OPERATORS), seen
    for operator in OPERATORS:
        for mutant in [m for m in everything if operator_of(m) == operator][:5]:
            source = mutated_source(mutant)
            assert source == mutant.source and not generated.compile_error(mutant)
            tree = ast.parse(source)
            assert isinstance(tree.body[0], ast.FunctionDef) and tree.body[0].name == mutant.target.split(".")[-1]
            _, _, function = _resolve(mutant)
            original = ast.unparse(ast.parse(textwrap.dedent(inspect.getsource(function))))
            assert ast.unparse(tree) != original, mutant.name
            assert mutant.old != mutant.new, mutant.name


def test_each_operator_edits_what_it_says() -> None:
    found = {m.name: m for m in module_mutants("design")}
    assert found[KNOWN_KILLED].old.startswith("min(") and found[KNOWN_KILLED].new.startswith("max(")
    hw = {m.name: m for m in module_mutants("replica_manager") if m.target == "ReplicaManager._maybe_advance_hw"}
    assert hw["replica_manager:ReplicaManager._maybe_advance_hw:if-false:0"].new == "False"
    assert hw["replica_manager:ReplicaManager._maybe_advance_hw:cmp:1"].new == "candidate >= replica.hw"
    negated = found["design:Design.fences_controller_writes:return-not:0"]
    assert negated.new == "not self.knobs.controller_epoch_fencing"
    # No deletion that could only raise: a local's one binding, a constructor's creation of an attribute.
    names = {m.name for m in module_mutants("replica_manager")}
    assert not any(n.startswith("replica_manager:ReplicaManager.__init__:delete") for n in names)
    stillborn = [m for m in module_mutants("controller") if m.target == "Controller._reassign"
                 and operator_of(m) == "delete" and m.old.startswith("ctx, psm, rsm, deletion")]
    assert stillborn == []


def test_the_lists_of_left_out_functions_and_equivalents_cannot_go_stale(everything: list[Mutant]) -> None:
    ids = {m.name for m in everything}
    assert set(EQUIVALENT) <= ids, set(EQUIVALENT) - ids
    assert all(why.strip() for why in EQUIVALENT.values())
    for entry in NOT_MUTATED:
        module, function = entry.split(":")
        assert callable(getattr(__import__(generated.qualified(module), fromlist=["_"]), function)), entry


def test_the_judge_kills_by_a_named_oracle_and_spares_a_mutant_no_oracle_reaches(
        everything: list[Mutant]) -> None:
    chosen = [m for m in everything if m.name in (KNOWN_KILLED, UNREACHED)]
    assert len(chosen) == 2 and UNREACHED not in EQUIVALENT
    results = {r.mutant.name: r for r in run_generated(chosen, processes=2, suite=TINY, timeout=120)}
    killed, spared = results[KNOWN_KILLED], results[UNREACHED]
    assert killed.named and killed.status == "killed" and NAMED & killed.kills.keys(), killed.kills
    assert spared.status == "survived" and not spared.kills and not spared.error, spared.kills
    score = Score([killed, spared], len(everything))
    summary = score.to_json()
    assert (summary["judged"], summary["killed"], summary["rate"]) == (2, 1, 0.5)
    assert summary["survivors"] == [UNREACHED] and not summary["met"]


def test_a_mutant_that_does_not_compile_is_invalid_and_not_counted() -> None:
    broken = Mutant("election:_first:cmp:99", "kcm.impl.election", "_first", "", "", "line 0: x -> y",
                              source="def _first(:\n    pass\n")
    result = generated.judge(broken, TINY)
    assert result.status == "invalid" and "SyntaxError" in result.invalid
    assert Score([result], 1).counts() == {"run": 1, "invalid": 1, "equivalent": 0, "judged": 0, "killed": 0,
                                           "rate": 0.0}


def test_kcm_mutate_generated_lists_and_scores_as_its_schema_says(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutate", "--generated", "--list", "--module", "election", "--sample", "3"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 3 and all(line.startswith("election:") for line in listed)
    code = main(["mutate", "--generated", "--module", "design", "--sample", "2", "--seed", "1", "--seeds", "1",
                 "--sim-steps", "200", "--examples", "2", "--steps", "5", "--processes", "2", "--json",
                 "--progress", "none"])
    document = json.loads(capsys.readouterr().out)
    validate("mutate-generated", document)
    assert document["run"] == 2 and document["modules"] == ["design"] and document["sample"] == 2
    assert code == (0 if document["rate"] >= 0.90 else 1)
    assert main(["mutate", "--generated", "--module", "sim"]) == 2
    assert "not a core module" in capsys.readouterr().err
