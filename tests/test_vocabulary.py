"""The knob vocabulary: which designs count as safe, and how a design is written back as settings."""

from __future__ import annotations

import pytest

from kcm.spec.tlc.config import bindings, knob_settings
from kcm.spec.vocabulary import KNOB_NAMES, KnobError, Knobs


def test_the_defaults_are_the_safe_design() -> None:
    assert Knobs().is_safe
    assert Knobs().changed() == {} and Knobs().describe() == "defaults (safe design)"


def test_min_isr_is_safe_at_any_value() -> None:
    assert Knobs(min_isr=2).is_safe
    assert Knobs(min_isr=3).settings() == ["min_isr=3"]


@pytest.mark.parametrize("setting", ["truncation=hw", "truncation=kip279", "unclean_election=true",
                                     "controller_epoch_fencing=false", "leader_epoch_check=false",
                                     "broker_epoch=false"])
def test_every_other_knob_makes_a_design_unsafe(setting: str) -> None:
    knobs = Knobs().with_settings([setting])
    assert not knobs.is_safe
    assert not knobs.with_value("min_isr", 2).is_safe


def test_settings_read_back_as_the_same_knobs() -> None:
    knobs = Knobs(truncation="kip101", unclean_election=True, min_isr=2)
    assert knobs.settings() == ["truncation=kip101", "unclean_election=true", "min_isr=2"]
    assert Knobs().with_settings(knobs.settings()) == knobs
    assert knobs.describe() == "truncation=kip101, unclean_election=true, min_isr=2"


def test_an_unknown_knob_is_refused() -> None:
    with pytest.raises(KnobError, match="unknown knob 'nope'"):
        Knobs().with_settings(["nope=1"])


@pytest.mark.parametrize(("value", "expected"), [("false", False), ("true", True), ("TRUE", True), (False, False)])
def test_broker_epoch_reads_booleans(value: object, expected: bool) -> None:
    assert Knobs().with_value("broker_epoch", value).broker_epoch is expected


@pytest.mark.parametrize("value", ["2", "", "before-2.2", 0, None, "yes", "1", "on", "off"])
def test_broker_epoch_refuses_anything_else(value: object) -> None:
    with pytest.raises(KnobError, match=r"knob broker_epoch: .* is not a boolean"):
        Knobs().with_value("broker_epoch", value)


def test_broker_epoch_is_on_by_default_and_a_tla_constant() -> None:
    assert Knobs().broker_epoch and "broker_epoch" in KNOB_NAMES
    before = Knobs(broker_epoch=False)
    assert before.settings() == ["broker_epoch=false"]
    assert "    BrokerEpoch = FALSE\n" in bindings(before)
    assert knob_settings("CONSTANTS\n    BrokerEpoch = FALSE\n") == before
