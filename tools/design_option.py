"""`--design PATH`: a design folder of one's own (kcm.spec.design_folder), on the commands that run one."""

from __future__ import annotations

import argparse

from kcm.spec.design_folder import DesignFolder, read_design
from kcm.spec.vocabulary import Knobs


def add_design_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--design", metavar="PATH", default=None,
                        help=f"a design folder (design.toml, its TLA+ module, its strategy): {what} "
                             "(docs/designs.md)")


def chosen_design(args: argparse.Namespace) -> DesignFolder | None:
    """The design folder `--design` names, read and checked; a bad one is a DesignError (one line, exit 2)."""
    return None if args.design is None else read_design(args.design)


def described(knobs: Knobs, design: DesignFolder | None) -> str:
    """What a run was made on, as its first line says it: the knobs, or the design on its knobs."""
    return knobs.describe() if design is None else f"design {design.name} on {knobs.describe()}"
