"""The scenario files of tests/scenarios/: each runs through the scenario library (conformance/scenario/) and
must print exactly its expected outputs, with every violation expected. The commands and the file format are
described in `kcm.conformance.scenario.environment` and `kcm.conformance.scenario.language`.

Regenerate expectations with `KCM_REWRITE=1 bash tools/dev test tests/test_scenarios.py`, then read the diff.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from kcm.conformance.scenario.environment import run_scenario
from kcm.conformance.scenario.language import scenario_files

SCENARIOS: Final = Path(__file__).parent / "scenarios"


@pytest.mark.parametrize("path", scenario_files(SCENARIOS), ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    run_scenario(path)
