"""`--design PATH`: a design folder of one's own (kcm.spec.design_folder), on the commands that run one."""

from __future__ import annotations

import argparse

from kcm.conformance.design_readings import unread_by_tlc
from kcm.spec.design_folder import DesignFolder, read_design
from kcm.spec.verdicts import UNSUPPORTED
from kcm.spec.vocabulary import Knobs
from kcm.tools.errors import UsageError


def add_design_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--design", metavar="PATH", default=None,
                        help=f"a design folder (design.toml, its TLA+ module, its strategy): {what} "
                             "(docs/designs.md)")


def chosen_design(args: argparse.Namespace) -> DesignFolder | None:
    """The design folder `--design` names, read and checked; a bad one is a DesignError (one line, exit 2)."""
    return None if args.design is None else read_design(args.design)


def refuse_unread_by_tlc(design: DesignFolder | None) -> None:
    """A command of TLC alone (check, hunt) on a design whose strategy changes a point its TLA+ module does not:
    TLC would check the base design's rule there, so the command says `unsupported` and stops (exit 2)."""
    unread = () if design is None else unread_by_tlc(design)
    if design is not None and unread:
        raise UsageError(f"{design.path}: {UNSUPPORTED}: the strategy changes {', '.join(unread)}, which the TLA+ "
                         f"module does not: TLC would check the base design's rule there (kcm design check "
                         f"{design.path})")


def described(knobs: Knobs, design: DesignFolder | None) -> str:
    """What a run was made on, as its first line says it: the knobs, or the design on its knobs."""
    return knobs.describe() if design is None else f"design {design.name} on {knobs.describe()}"
