"""Every design is known to every engine (kcm.conformance.design_readings): kcm's own designs and the ones of
tests/data/designs, and a made-up design that lacks one reading is named for it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kcm.conformance.design_readings import readings, unread_by_tlc
from kcm.conformance.explore.stateful import MACHINES
from kcm.conformance.review import review_row
from kcm.spec.design_folder import SCHEMA_PATH, read_design
from kcm.spec.designs import BUILT_IN_DESIGNS, KNOWN_BUGS, VARIANTS, built_in_design, design_rows
from kcm.spec.verdicts import UNSUPPORTED
from kcm.tools.cli import main

DESIGNS = Path(__file__).parent / "data" / "designs"


@pytest.mark.parametrize("name", BUILT_IN_DESIGNS)
def test_every_built_in_design_is_known_to_every_engine(name: str) -> None:
    found = readings(built_in_design(name))
    assert found.problems == []
    assert found.z3.startswith("knobs ")


def test_every_engine_reads_its_known_bugs_from_the_designs_alone() -> None:
    """BMC's stories and the conformance searches are the built-in designs' known bugs, all of them and nothing
    else: a bug is added to one manifest, and each engine has it."""
    from kcm.conformance.explore.known_bugs import KNOWN_BUG_SEARCHES
    from kcm.spec.z3.bmc import BMC_BUGS

    named = {name: readings(built_in_design(name)) for name in BUILT_IN_DESIGNS}
    assert [bug.label for bug in BMC_BUGS] == [label for found in named.values() for label in found.bmc]
    assert [s.name for s in KNOWN_BUG_SEARCHES] == [name for found in named.values() for name in found.search]
    assert [bug.design for bug in KNOWN_BUGS] == [name for name in BUILT_IN_DESIGNS
                                                  for _ in built_in_design(name).bugs]
    assert all(bug.knobs == built_in_design(bug.design).base for bug in KNOWN_BUGS)
    # What the manifests' schema lets a search name is a machine of the conformance searches.
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    machines = schema["properties"]["bugs"]["items"]["properties"]["searches"]["items"]["properties"]["machine"]
    assert set(machines["enum"]) == set(MACHINES)


def test_the_review_rows_are_the_built_in_designs() -> None:
    assert [v.label for v in VARIANTS] == [built_in_design(n).label for n in BUILT_IN_DESIGNS]


@pytest.mark.parametrize("name", ["eager-isr-join", "strict-isr-join"])
def test_a_design_of_ones_own_is_read_by_tlc_and_the_implementation_and_unsupported_by_z3(name: str) -> None:
    found = readings(read_design(DESIGNS / name))
    assert found.problems == []
    assert "+ " in found.tla and "(isr-expansion)" in found.impl
    assert found.z3.startswith(f"{UNSUPPORTED}: isr-expansion")


def test_an_also_broken_invariant_is_what_another_engine_found() -> None:
    design = built_in_design("no-leader-epoch-check")
    assert design.also_breaks == frozenset({"NoCommittedDataLoss"}) and design.expected == {"LeaderEpochMonotonic"}
    assert readings(design).search == ["leader-epoch-check-off-replication"]


def _made_up(tmp_path: Path, old: str, new: str, drop: str | None = None) -> Path:
    folder = tmp_path / "eager-isr-join"
    shutil.copytree(DESIGNS / "eager-isr-join", folder)
    manifest = folder / "design.toml"
    manifest.write_text(manifest.read_text().replace(old, new))
    if drop is not None:
        (folder / drop).write_text((folder / drop).read_text().replace("    def in_sync_for_expansion", "    def x"))
    return folder


@pytest.mark.parametrize(("old", "new", "drop", "problem"), [
    ('models = ["deep"]', 'models = ["nomodel"]', None, "tla: no model 'nomodel' in spec/"),
    ('expected = ["NoCommittedDataLoss"]', 'expected = ["NoCommittedDataLoss", "ControlledShutdownCompletes"]', None,
     "tla: model deep does not check ControlledShutdownCompletes"),
    ("", "", "strategy.py", "impl: the TLA+ module changes isr-expansion, the strategy does not"),
    ('model = "deep"', 'model = "nomodel"', None, "tla: the known bug 'a follower joins the ISR before it has the "
                                                  "committed records' names no model of spec/: 'nomodel'"),
    ('model = "deep"\n', "", None, "tla: the known bug 'a follower joins the ISR before it has the committed "
                                   "records' breaks an expected invariant but names no reproduction model"),
    ('[tla]\nmodule = "EagerIsrJoin.tla"\nhooks = { InSyncForExpansion = "EAGER_InSyncForExpansion" }\n', "", None,
     "tla: the strategy changes rules the TLA+ model does not"),
])
def test_a_made_up_design_that_lacks_a_reading_is_named_for_it(tmp_path: Path, old: str, new: str,
                                                                 drop: str | None, problem: str) -> None:
    found = readings(read_design(_made_up(tmp_path, old, new, drop)))
    assert any(p.startswith(problem) for p in found.problems), found.problems


# A strategy that also changes the HW rule, which no TLA+ hook decides: TLC would check the base design's rule.
HW_TOO = '''

    def high_watermark(self, own_end: int, isr_ends: Collection[int]) -> int:
        return own_end
'''


def _hw_too(tmp_path: Path) -> Path:
    folder = _made_up(tmp_path, "", "")
    strategy = folder / "strategy.py"
    strategy.write_text("from collections.abc import Collection\n" + strategy.read_text() + HW_TOO)
    return folder


def test_a_strategy_that_changes_a_point_tlc_cannot_read_is_unsupported_by_tlc(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    design = read_design(_hw_too(tmp_path))
    assert unread_by_tlc(design) == ("hw-advancement",)
    assert any(p.startswith(f"tla: {UNSUPPORTED}: the strategy changes hw-advancement") for p in
               readings(design).problems)
    # Its review rows say so rather than run TLC on the base rule; kcm check and hunt refuse it.
    row = review_row(design_rows(design)[0], tmp_path / "review", quick=True)
    assert row.verdict == UNSUPPORTED and not row.errors and row.runs == 0
    assert main(["check", "--design", str(design.path), "--progress", "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{UNSUPPORTED}: the strategy changes hw-advancement" in err


def test_design_check_lists_each_engine_s_reading_and_what_it_lacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["design", "check", str(DESIGNS / "eager-isr-join")]) == 0
    out = capsys.readouterr().out
    assert "impl      EagerIsrJoin (isr-expansion)" in out and "searches  eager-isr-join-replication" in out
    assert main(["design", "check", str(_hw_too(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the strategy changes hw-advancement" in err
