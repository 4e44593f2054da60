"""kcm against a past commit, in the same run: what its commands write, byte for byte, and how fast its simulator
is. The measure of a refactoring that must change nothing (issue 39 moved the designs into folders: every
built-in design's output must stay as it was).

Run it from a checkout: `python -m kcm.tools.bench.against --commit 9f9f5e1` (`--quick` leaves out the review
matrix, about 3 minutes a side on 2 cores). The commit's sources are exported (`git archive`) to a temporary
folder; each side runs `python -m kcm.tools.cli` on its own sources, with this interpreter and its libraries.
Compared, each side running the same command:
  sim         the simulator's traces of seeds 3 and 11, 5,000 steps, on the defaults and 8 knob settings, and
              the seconds each side took (the ratio is the simulator's speed against the commit);
  check       TLC's counterexample of every reproduction model (`kcm check --model M --out`), and its report
              with the lines that carry timings left out;
  scenario    the commit's scenario files (tests/scenarios), each rerun by each side's runner and rewritten:
              the commands' outputs;
  review      `kcm review --json`: every cell's verdict and counterexample, timings left out.
Exit 0 when every output is identical, 1 when one differs (the table names it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    print_footer,
    print_header,
    ratio,
    table,
    write_summary,
)

NAME = "against"
TOP_LEVEL = ("spec", "impl", "conformance", "tools")
SEEDS = (3, 11)
SIM_STEPS = 5000
SETTINGS: tuple[tuple[str, ...], ...] = (
    (), ("truncation=hw",), ("truncation=kip101",), ("truncation=kip279",), ("unclean_election=true",),
    ("unclean_election=true", "min_isr=2"), ("controller_epoch_fencing=false",), ("leader_epoch_check=false",),
    ("broker_epoch=false",),
)
MODELS = ("kafka1211", "kip101", "kip279", "kafka2334", "unclean", "zombie", "staleepoch")
# Runs `kcm.tools.cli` from the sources of the folder given first, whatever kcm this interpreter has installed
# (an editable install's finder would answer `import kcm` before the path is searched).
# Then a module to run as `python -m` would (`-m MODULE`) or a program's source (`-c SOURCE`), and its arguments.
_LAUNCH = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
sys.path.insert(0, sys.argv.pop(1))
kind, what = sys.argv.pop(1), sys.argv.pop(1)
sys.argv[0] = "kcm"
if kind == "-m":
    runpy.run_module(what, run_name="__main__", alter_sys=True)
else:
    exec(compile(what, "<kcm bench against>", "exec"), {"__name__": "__main__"})
"""
_SCENARIO = """
import sys
from pathlib import Path
from kcm.conformance.scenario.environment import run_scenario
for path in sys.argv[1:]:
    run_scenario(Path(path), rewrite=True)
"""
# Lines of a command's report that carry a timing or a path of the run's own.
_VOLATILE = re.compile(r"\d+(\.\d+)? ?s\b|states/s|seconds|/tmp/|kcm-against-")


@dataclass
class Side:
    """One side of the comparison: a folder `kcm/` of links onto a tree's top-level folders."""

    name: str
    shim: Path

    def run(self, kind: str, what: str, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _LAUNCH, str(self.shim), kind, what, *args],
                              capture_output=True, text=True, check=False)
        return done, time.perf_counter() - started

    def kcm(self, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
        return self.run("-m", "kcm.tools.cli", *args)


def _side(name: str, tree: Path, folder: Path) -> Side:
    shim = folder / f"{name}-shim"
    (shim / "kcm").mkdir(parents=True)
    for top in TOP_LEVEL:
        (shim / "kcm" / top).symlink_to(tree / top, target_is_directory=True)
    return Side(name, shim)


def _export(commit: str, checkout: Path, folder: Path) -> Path:
    tree = folder / commit
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(checkout), "archive", commit], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"bench against: git archive {commit}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def _stable(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not _VOLATILE.search(line))


def _stable_json(value: Any) -> Any:
    """A review document without its timings, its counterexamples named by file alone (each side writes its
    own folder)."""
    if isinstance(value, dict):
        return {k: Path(v).name if k == "trace" and isinstance(v, str) else _stable_json(v)
                for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_stable_json(v) for v in value]
    return value


@dataclass
class Comparison:
    what: str
    identical: bool
    detail: str
    old_s: float = 0.0
    new_s: float = 0.0


def compare_sim(old: Side, new: Side, folder: Path) -> list[Comparison]:
    found = []
    for settings in SETTINGS:
        for seed in SEEDS:
            knobs = [arg for s in settings for arg in ("--set", s)]
            paths, seconds = [], []
            for side in (old, new):
                path = folder / f"sim-{side.name}-{seed}-{'-'.join(settings) or 'defaults'}.jsonl"
                done, took = side.kcm("sim", "--seed", str(seed), "--steps", str(SIM_STEPS), *knobs, "--out", str(path))
                if done.returncode != 0:
                    raise SystemExit(f"bench against: {side.name}: kcm sim: {done.stderr.strip()}")
                paths.append(path)
                seconds.append(took)
            same = paths[0].read_bytes() == paths[1].read_bytes()
            lines = sum(1 for _ in paths[1].open(encoding="utf-8"))
            found.append(Comparison(f"sim seed {seed} {' '.join(settings) or 'defaults'}", same,
                                    f"{lines:,} events", *seconds))
    return found


def compare_check(old: Side, new: Side, folder: Path) -> list[Comparison]:
    found = []
    for model in MODELS:
        said, traces, seconds = [], [], []
        for side in (old, new):
            trace = folder / f"check-{side.name}-{model}.jsonl"
            done, took = side.kcm("check", "--model", model, "--out", str(trace), "--progress", "none")
            said.append((done.returncode, _stable(done.stdout)))
            traces.append(trace.read_bytes() if trace.exists() else b"")
            seconds.append(took)
        same = said[0] == said[1] and traces[0] == traces[1]
        events = traces[1].count(b"\n")
        found.append(Comparison(f"check --model {model}", same, f"exit {said[1][0]}, counterexample {events} events",
                                *seconds))
    return found


def compare_scenarios(old: Side, new: Side, old_tree: Path, folder: Path) -> list[Comparison]:
    files = sorted((old_tree / "tests" / "scenarios").glob("*.txt"))
    copies: dict[str, list[Path]] = {}
    for side in (old, new):
        target = folder / f"scenarios-{side.name}"
        shutil.copytree(old_tree / "tests" / "scenarios", target)
        copies[side.name] = [target / f.name for f in files]
        done, _ = side.run("-c", _SCENARIO, *map(str, copies[side.name]))
        if done.returncode != 0:
            raise SystemExit(f"bench against: {side.name}: scenarios: {done.stderr.strip()[-400:]}")
    differing = [f.name for f, a, b in zip(files, copies[old.name], copies[new.name], strict=True)
                 if a.read_bytes() != b.read_bytes()]
    return [Comparison(f"scenarios ({len(files)} files of the commit)", not differing,
                       "differ: " + ", ".join(differing) if differing else "every command's output")]


def compare_review(old: Side, new: Side, folder: Path) -> list[Comparison]:
    documents, traces, seconds = [], [], []
    for side in (old, new):
        out = folder / f"review-{side.name}"
        done, took = side.kcm("review", "--json", "--workers", "2", "--out", str(out), "--progress", "none")
        if done.returncode not in (0, 1):
            raise SystemExit(f"bench against: {side.name}: kcm review: {done.stderr.strip()[-400:]}")
        documents.append(_stable_json(json.loads(done.stdout)))
        traces.append({p.name: p.read_bytes() for p in sorted(out.glob("*.jsonl"))})
        seconds.append(took)
    same = documents[0] == documents[1] and traces[0] == traces[1]
    return [Comparison("review (the whole matrix)", same, f"{len(traces[1])} counterexamples", *seconds)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "kcm's outputs against a past commit's, byte for byte, in the same run.")
    parser.add_argument("--commit", default="9f9f5e1", help="the commit to compare with (default 9f9f5e1)")
    args = parser.parse_args(argv)
    checkout = Path(__file__).resolve().parents[2]
    out = console()
    print_header(out, f"kcm against {args.commit}", command_line(NAME, list(sys.argv[1:] if argv is None else argv)))
    with tempfile.TemporaryDirectory(prefix="kcm-against-") as tmp:
        folder = Path(tmp)
        old_tree = _export(args.commit, checkout, folder)
        old, new = _side(args.commit, old_tree, folder), _side("HEAD", checkout, folder)
        found = compare_sim(old, new, folder)
        found += compare_check(old, new, folder)
        found += compare_scenarios(old, new, old_tree, folder)
        if not args.quick:
            found += compare_review(old, new, folder)
    rows = table(f"outputs of {args.commit} and of this checkout (HEAD), each command run by both",
                 ["output", "identical", "detail", f"{args.commit} s", "HEAD s", "HEAD vs commit"], text_columns=3)
    for item in found:
        timed = item.old_s > 0
        rows.add_row(item.what, "yes" if item.identical else "NO", item.detail,
                     f"{item.old_s:.1f}" if timed else "", f"{item.new_s:.1f}" if timed else "",
                     ratio(item.new_s, item.old_s) if timed else "")
    out.print(rows)
    sims = [item for item in found if item.what.startswith("sim ")]
    old_s, new_s = sum(i.old_s for i in sims), sum(i.new_s for i in sims)
    out.print(f"simulator, {len(sims)} runs of {SIM_STEPS:,} steps: {args.commit} {old_s:.1f} s, HEAD {new_s:.1f} s "
              f"({ratio(new_s, old_s)}; each side a fresh interpreter, start-up included)")
    differing = [item.what for item in found if not item.identical]
    out.print(f"identical: {len(found) - len(differing)} of {len(found)}"
              + (f"; differ: {', '.join(differing)}" if differing else ""))
    write_summary(args.summary, [
        Figure(NAME, f"outputs identical to {args.commit}", len(found) - len(differing), "outputs",
               f"{len(found)} of {len(found)}", not differing),
        Figure(NAME, f"simulator time against {args.commit}", new_s / old_s if old_s else 0.0, "x"),
    ])
    print_footer(out)
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
