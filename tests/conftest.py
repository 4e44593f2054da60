"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kcm.spec.tlc.modelcheck import CheckOutcome, check_model, model_knobs


@pytest.fixture(scope="session")
def reproduction(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], CheckOutcome]:
    """TLC's counterexample of a reproduction model (its own knobs), found once per test session: the TLA+,
    replay and Z3 agreement tests read the same counterexamples."""
    folder = tmp_path_factory.mktemp("tlc-counterexamples")
    found: dict[str, CheckOutcome] = {}

    def outcome(model: str) -> CheckOutcome:
        if model not in found:
            trace: Path = folder / f"{model}.jsonl"
            found[model] = check_model(model, model_knobs(model), heap_mb=2048, trace_out=trace)
        return found[model]

    return outcome
