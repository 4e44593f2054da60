"""The implementation's reading of the design points (kcm.spec.design_points): one object the replica managers,
the controllers and their store call wherever designs of this controller differ, instead of a branch on a knob
in each.

`Design(knobs)` is every built-in design: each point reads the knob that selects it. A design of one's own
subclasses it and overrides the points it changes, as its TLA+ module restates only the hooks it changes.
Each method is named after its point's TLA+ hook (spec/KafkaReplication.tla), in snake case.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import textwrap
from collections.abc import Collection, Sequence
from typing import Final

from kcm.impl import election
from kcm.impl.messages import UNDEFINED_EPOCH, Record
from kcm.impl.replica_log import (
    end_offset_for_epoch,
    kip101_truncation_offset,
    kip279_truncation_offset,
    largest_epoch_at_most,
)
from kcm.spec.design_folder import MANIFEST, DesignError, DesignFolder, field_line
from kcm.spec.design_points import DESIGN_POINTS
from kcm.spec.vocabulary import Knobs

# Ticks a follower may go without catching up before its leader drops it from the ISR.
REPLICA_LAG_TICKS: Final = 6


class Design:
    """Every design point of the implementation; the built-in designs read their knobs."""

    # A design folder's name (kcm.spec.design_folder), which the traces it makes carry; "" for a built-in design.
    name = ""

    def __init__(self, knobs: Knobs) -> None:
        self.knobs = knobs

    # -- follower truncation (the four eras) -----------------------------------------------------------------

    def truncate_on_become_follower(self) -> bool:
        """A new follower truncates to its own HW at once (KAFKA-1211's era) instead of asking its leader."""
        return self.knobs.truncation == "hw"

    def epoch_end_answer(self, log: list[Record], requested: int, current: int) -> tuple[int, int]:
        """A leader's answer to OffsetsForLeaderEpoch: (epoch, end offset), (UNDEFINED_EPOCH, -1) for none."""
        if self.knobs.truncation == "kip101":
            return requested, end_offset_for_epoch(log, requested, current)
        epoch = largest_epoch_at_most(log, requested, current)
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, -1
        return epoch, end_offset_for_epoch(log, epoch, current)

    def truncation_offset(self, log: list[Record], epoch: int, end: int) -> int:
        """Where a follower truncates to, given its leader's answer for an epoch it knows."""
        if self.knobs.truncation == "kip101":
            return kip101_truncation_offset(log, end)
        return kip279_truncation_offset(log, epoch, end)

    # -- request fencing ---------------------------------------------------------------------------------------

    def fence_current_leader_epoch(self) -> bool:
        """KIP-320: Fetch and OffsetsForLeaderEpoch carry the follower's leader epoch, and a leader in another
        epoch refuses them."""
        return self.knobs.truncation == "kip320"

    def refuses_controller_epoch(self, epoch: int, seen: int) -> bool:
        """A broker refuses a controller request from an older controller epoch than one it has seen."""
        return self.knobs.controller_epoch_fencing and epoch < seen

    def fences_controller_writes(self) -> bool:
        """A controller's store writes check that /controller_epoch is still the one it was elected with."""
        return self.knobs.controller_epoch_fencing

    def refuses_leader_epoch(self, epoch: int, known: int | None) -> bool:
        """A broker refuses a LeaderAndIsr entry whose leader epoch is not newer than the one it has."""
        return self.knobs.leader_epoch_check and known is not None and epoch <= known

    def broker_epoch_fencing(self) -> bool:
        """KIP-380 (Kafka 2.2): controller requests carry the broker epoch the controller knows, a broker refuses
        one addressed to an earlier registration of its own, and the controller sees a bounced broker."""
        return self.knobs.broker_epoch

    # -- leader election on failure ----------------------------------------------------------------------------

    def offline_partition_leader(self, assignment: Sequence[int], isr: Collection[int],
                                 live: Collection[int]) -> int | None:
        """The new leader of a partition whose leader failed: the first live ISR member in assignment order, or,
        with unclean election, the first live replica."""
        return election.offline_partition_leader(assignment, isr, live, self.knobs.unclean_election)

    # -- ISR shrink and expansion --------------------------------------------------------------------------------

    def in_sync_for_expansion(self, offset: int, leader_hw: int, epoch_start: int) -> bool:
        """A follower at this fetch offset joins the ISR: from KIP-320 on it must also have reached the
        leader's epoch start offset."""
        caught_up = offset >= leader_hw
        if self.knobs.truncation == "kip320":
            return caught_up and offset >= epoch_start
        return caught_up

    def lagging(self, now: int, last_caught_up: int) -> bool:
        """A follower that has not caught up for too long leaves the ISR."""
        return now - last_caught_up > REPLICA_LAG_TICKS

    # -- HW advancement and exposure, min ISR -----------------------------------------------------------------------

    def high_watermark(self, own_end: int, isr_ends: Collection[int]) -> int:
        """The HW a leader may advance to: the lowest log end among it and its ISR."""
        return min(own_end, min(isr_ends, default=own_end))

    def accepts_write(self, acks: int, isr_size: int) -> bool:
        """A produce with acks=all is refused while the ISR is smaller than min_isr."""
        return acks != -1 or isr_size >= self.knobs.min_isr


def load_strategy(design: DesignFolder, knobs: Knobs | None = None) -> Design:
    """The implementation's strategy of a design folder, on its base design's knobs (or `knobs`): the class its
    manifest names in its strategy module, or the base design itself where it has none. A module that does not
    load, or a class that is not a Design, is a DesignError naming the file and line."""
    chosen = design.base if knobs is None else knobs
    if design.strategy is None or design.strategy_class is None:
        return Design(chosen)
    path = design.strategy
    name = f"kcm_design_{design.name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass or a pickle of the strategy finds its module by name
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise DesignError(path, err.lineno or 0, "", f"does not parse: {err.msg}") from None
    except Exception as err:  # the reviewer's code, failing as it loads: named, not a traceback
        raise DesignError(path, _line_in(err, str(path)), "", f"does not load: {type(err).__name__}: {err}") from None
    found = getattr(module, design.strategy_class, None)
    if not (isinstance(found, type) and issubclass(found, Design)):
        raise DesignError(design.path / MANIFEST, field_line(design, "python.class"), "python.class",
                          f"{path.name} defines no subclass of kcm.impl.design.Design called {design.strategy_class}")
    strategy = found(chosen)
    strategy.name = design.name
    return strategy


def _line_in(err: BaseException, file: str) -> int:
    """The line of `file` the error was raised from, innermost first."""
    tb = err.__traceback__
    line = 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def overridden_points(design: Design) -> tuple[str, ...]:
    """The design points a strategy changes: those with a method its class overrides."""
    changed = {name for klass in type(design).__mro__ if klass is not Design and issubclass(klass, Design)
               for name in vars(klass)}
    return tuple(p.name for p in DESIGN_POINTS if changed & set(p.python))


def strategy_source(class_name: str, base: Knobs) -> str:
    """A new design's strategy module: the method of every design point TLC can read as a design has it (a hook),
    each calling the base design's rule, under the point it decides; edit the rules the design changes and delete
    the others. A point without a hook is left out: a strategy that changes it is unsupported by TLC."""
    methods = []
    unhooked = [point.name for point in DESIGN_POINTS if point.python and not point.tla_hooks]
    for point in DESIGN_POINTS:
        if not point.python or not point.tla_hooks:
            continue
        methods.append(textwrap.fill(f"-- {point.name}: {point.meaning}.", 112, initial_indent="    # ",
                                     subsequent_indent="    # ") + "\n")
        for method in point.python:
            function = getattr(Design, method)
            signature = inspect.signature(function)
            arguments = ", ".join(name for name in signature.parameters if name != "self")
            doc = " ".join((function.__doc__ or "").split())
            methods.append(textwrap.fill(doc, 112, initial_indent="    # ", subsequent_indent="    # ") + "\n"
                           f"    def {method}{str(signature).replace(chr(39), '')}:\n"
                           f"        return super().{method}({arguments})\n")
    about = textwrap.fill(f"The implementation's side of the design, on {base.describe()}: the rule of every "
                          "design point a TLA+ hook decides, restated.", 112)
    left_out = textwrap.fill(f"Change the rules the design changes; delete the others. Left out: "
                             f"{', '.join(unhooked)}, which no hook decides (a strategy that changes them is "
                             "unsupported by TLC).", 112)
    return (f'"""{about}\n\n{left_out}"""\n\n'
            "from __future__ import annotations\n\n"
            "from collections.abc import Collection, Sequence\n\n"
            "from kcm.impl.design import Design\n"
            "from kcm.impl.messages import Record\n\n\n"
            f"class {class_name}(Design):\n" + "\n".join(methods))
