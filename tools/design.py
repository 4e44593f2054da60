"""`kcm design new NAME --from DESIGN [--out DIR]`: a design folder to start from (docs/designs.md); `kcm design
check PATH`: how every engine reads a design, and what it lacks (kcm.conformance.design_readings).

The folder holds a manifest, a TLA+ module restating every hook of the base design under the new design's
prefix, and a strategy restating every design point's rule; the new design is the base design until its rules
are edited. DESIGN is a built-in design (`defaults`, or knob settings: `truncation=kip279,min_isr=2`). An
existing folder is not overwritten.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kcm.conformance.design_readings import readings
from kcm.impl.design import strategy_source
from kcm.spec.atomic_output import claimed_folder
from kcm.spec.design_folder import module_name, new_design, read_design
from kcm.spec.vocabulary import Knobs
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, UsageError


def register(subparsers: Any) -> None:
    design = subparsers.add_parser("design", help="design folders of one's own: kcm design new, kcm design check")
    sub = design.add_subparsers(dest="design_command", required=True, parser_class=type(design))
    new = sub.add_parser("new", help="a new design folder, every hook and rule of its base design restated")
    new.add_argument("name", help="the design's name: letters, digits and dashes (trust-leader-hw)")
    new.add_argument("--from", dest="base", default="defaults", metavar="DESIGN",
                     help="the built-in design it starts from: defaults, or knob settings (truncation=kip279)")
    new.add_argument("--out", metavar="DIR", default=None, help="the folder to write (default ./NAME)")
    new.set_defaults(handler=cmd_new)
    check = sub.add_parser("check", help="how every engine reads a design folder, and what it lacks")
    check.add_argument("path", metavar="PATH", help="the design folder (or its design.toml)")
    check.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    """Each engine's reading of the design, then what it lacks: exit 0 when every engine reads it (or says
    unsupported where it cannot), 2 with a line per problem otherwise."""
    design = read_design(args.path)
    found = readings(design)
    print(f"design {design.name} ({design.path}), on {design.base.describe()}")
    for engine, reading in (("tla", found.tla), ("impl", found.impl), ("z3", found.z3),
                            ("bmc", ", ".join(found.bmc) or "no story"),
                            ("searches", ", ".join(found.search) or "none")):
        print(f"  {engine:<9} {reading}")
    if not found.problems:
        print("every engine reads it or says unsupported where it cannot")
        return EXIT_OK
    for problem in found.problems:
        print(f"kcm: error: {design.path}: {problem}", file=sys.stderr)
    return EXIT_USAGE


def cmd_new(args: argparse.Namespace) -> int:
    base = Knobs() if args.base == "defaults" else Knobs().with_settings([s.strip() for s in args.base.split(",")])
    files = new_design(args.name, base, args.base)
    files["strategy.py"] = strategy_source(module_name(args.name), base)
    target = Path(args.out or args.name)
    if target.exists():
        raise UsageError(f"{target}: exists already (a design folder is not overwritten)")
    with claimed_folder(target) as folder:
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
    design = read_design(target)  # what it wrote reads as a design, or the command is wrong
    print(f"wrote {target}/ ({', '.join(sorted(files))}): design {design.name} on {base.describe()}; "
          f"try kcm check --design {target}")
    return EXIT_OK
