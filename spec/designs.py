"""The design variants kcm reviews: a knob setting, the model of spec/ that shows it, and what it is documented
to break (the rows of `kcm review`'s two matrices; `kcm hunt` takes a design's model from them)."""

from __future__ import annotations

import functools
import importlib.resources
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kcm.spec.design_folder import DesignFolder, KnownBug, read_design
from kcm.spec.tlc.modelcheck import TLA_READINGS, WRITES_ACCEPTED, vocabulary_name
from kcm.spec.vocabulary import INVARIANTS, Knobs

HW: Final = "HighWatermarkMonotonic"
COLUMNS: Final = ("TypeOK", *INVARIANTS)
# What TLC checks for the columns: the two readings of HighWatermarkMonotonic separately, so that a
# violated cell says which reading broke.
TLA_INVARIANTS: Final = tuple(
    name for col in COLUMNS for name in ((*TLA_READINGS,) if col == HW else (col,))
)


@dataclass(frozen=True)
class Variant:
    """A row: a knob setting, the model it is checked on, and the invariants the design is documented to
    break there (`kcm verify` checks that they are among the violated ones; `kcm review` just reports)."""

    label: str
    settings: tuple[str, ...]
    model: str
    expected: frozenset[str] = frozenset()
    # A design folder of one's own (kcm.spec.design_folder): TLC binds its hooks on top of the settings.
    design: DesignFolder | None = None

    @property
    def knobs(self) -> Knobs:
        return Knobs().with_settings(self.settings)

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.label.lower()).strip("-")

    def focus(self) -> list[str]:
        """What a quick look at the row checks: what an unsafe design is documented to break (TLC stops at
        the first bad state, a fraction of the model), every invariant for a safe one."""
        if not self.expected:
            return list(TLA_INVARIANTS)
        return [name for name in TLA_INVARIANTS if column(name) in self.expected]


# kcm's own designs, folders of spec/built_in_designs/ in the form of anyone's (docs/designs.md): the rows of the
# invariant matrix, in this order.
BUILT_IN_DESIGNS: Final = ("defaults-kip320", "truncation-hw", "truncation-kip101", "truncation-kip279",
                           "truncation-kip320", "unclean-election", "unclean-election-min-isr-2",
                           "no-controller-epoch-fencing", "no-leader-epoch-check", "no-broker-epoch")


@functools.cache  # one folder, one design object
def built_in_design(name: str) -> DesignFolder:
    return read_design(Path(str(importlib.resources.files("kcm.spec").joinpath("built_in_designs", name))))


def design_rows(design: DesignFolder) -> tuple[Variant, ...]:
    """The rows of a design folder: one per model its manifest names, on its base design's knobs, named by its
    label (with the model where it has several) or by its name and model. A design of knob settings alone is a
    row of those settings: nothing of its own for an engine to read."""
    def label(model: str) -> str:
        if design.label is None:
            return f"{design.name} ({model})"
        return design.label if len(design.models) == 1 else f"{design.label} ({model})"

    own = None if design.knobs_only else design
    return tuple(Variant(label(model), tuple(design.base.settings()), model, design.expected, own)
                 for model in design.models)


VARIANTS: Final = tuple(row for name in BUILT_IN_DESIGNS for row in design_rows(built_in_design(name)))
# The known bugs of kcm's own designs, from their manifests: the one catalogue BMC (kcm.spec.z3.bmc), hunt and the
# conformance searches (kcm.conformance.explore.known_bugs) read.
KNOWN_BUGS: Final[tuple[KnownBug, ...]] = tuple(bug for name in BUILT_IN_DESIGNS for bug in built_in_design(name).bugs)

# The progress matrix (kcm review --liveness): the safe design on every liveness model, the availability the
# safety knobs trade, and one broken variant per property.
LIVENESS_VARIANTS: Final = (
    Variant("defaults (kip320)", (), "liveness"),
    Variant("defaults: controlled shutdown", (), "opsliveness"),
    # A shutdown refused while the controller has not yet seen the broker restart is retried, as Kafka 2.3.0's
    # broker does (KafkaServer.scala doControlledShutdown), and completes (docs/spec.md).
    Variant("controlled shutdown after a crash", (), "opslivenesscrash"),
    Variant("defaults: reassignment", (), "opslivenessreassign"),
    Variant("defaults: topic deletion", (), "opslivenessdelete"),
    # Clean elections give up a partition whose only ISR member is dead (LeaderElected does not apply: it asks
    # for a live ISR member); an unclean election keeps it writable and loses committed data instead.
    Variant("defaults: availability", (), "livenessavailability", frozenset({WRITES_ACCEPTED})),
    Variant("unclean_election=true", ("unclean_election=true",), "livenessavailability"),
    # Writes are refused while the ISR is smaller than min_isr (Produce's guard).
    Variant("min_isr=2", ("min_isr=2",), "livenessavailability", frozenset({WRITES_ACCEPTED})),
    Variant("no failover on broker failure", (), "livenessnofailover", frozenset({"LeaderElected"})),
    Variant("controller election not fair", (), "livenessunfairelection", frozenset({"ControllerElected"})),
    Variant("fetches and ISR expiration not fair", (), "livenessunfairfetch",
            frozenset({"HighWatermarkCatchesUp", "ReplicasRejoinIsr"})),
    Variant("controlled shutdown request not fair", (), "opslivenessunfairshutdown",
            frozenset({"ControlledShutdownCompletes"})),
    Variant("reassignment ISR change not fair", (), "opslivenessreassignunfair", frozenset({"ReassignmentCompletes"})),
    Variant("StopReplica response not fair", (), "opslivenessdeleteunfair", frozenset({"TopicDeletionCompletes"})),
    # A finding: a leader whose session expired crashes before it registers again; the controller, elected
    # meanwhile, took it for dead already and never elects another leader (docs/spec.md).
    Variant("session expiry", (), "livenessexpiry", frozenset({"LeaderElected"})),
)


def column(tla_name: str) -> str:
    """The review column (a vocabulary invariant) of a TLA+ invariant: a reading of HighWatermarkMonotonic
    belongs to its column."""
    return vocabulary_name(tla_name).partition("/")[0]
