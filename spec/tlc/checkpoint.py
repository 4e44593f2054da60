"""Long exhaustive runs that can be stopped and resumed (`kcm check --checkpoint DIR [--resume]`).

TLC writes a checkpoint of its search (the queue, the fingerprints, the states seen) into its metadata folder,
and `-recover FOLDER` continues a search from one (TLC 2.15, tlc2.TLC). kcm keeps the metadata folder in DIR
(`states/`, one timestamped folder per run, TLC's own) beside `kcm-run.json`, which says what is searched: the
model, the knobs, the invariants, the design, TLC's workers and its fingerprint function (`-fp`, pinned: a
resumed search must hash states as the one it continues). A resume is refused unless it asks for the same.

When: TLC checks for periodic work 3 s after its search starts and then once a minute (a constant of TLC 2.15,
TLCGlobals.progressInterval); it checkpoints at the first check after `minutes` have passed since the last one
(the JVM property tlc2.TLCGlobals.chkpt, in milliseconds). A run stopped between two checkpoints loses what it
did since the last one, no more.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kcm.spec.atomic_output import OutputError, claimed_in_place, replace

MANIFEST: Final = "kcm-run.json"
STATES: Final = "states"
# TLC's fingerprint function: the first of its irreducible polynomials, the same for every checkpointed run.
FINGERPRINT: Final = 0
# TLC 2.15's tlc2.tool.ModelChecker.checkpoint writes every part's checkpoint aside, then commits (renames) them
# in turn, the queue's first and the intern table's (vars.chkpt) last for a safety search: a run folder with
# vars.chkpt holds a whole checkpoint.
_COMPLETE: Final = "vars.chkpt"
DEFAULT_MINUTES: Final = 10.0


class CheckpointError(ValueError):
    """A checkpoint folder that cannot be used as asked: one line for the user, naming the folder."""


@dataclass(frozen=True)
class Checkpoint:
    """Keep TLC's states in `folder`, checkpointed every `minutes`; `resume`: continue the run checkpointed there."""

    folder: Path
    minutes: float = DEFAULT_MINUTES
    resume: bool = False

    @property
    def states(self) -> Path:
        return self.folder / STATES

    @property
    def milliseconds(self) -> int:
        return max(1, round(self.minutes * 60_000))

    def latest(self) -> Path | None:
        """The newest whole checkpoint of the folder's runs (a resumed run's own, once it checkpointed)."""
        if not self.states.is_dir():
            return None
        whole = [run for run in self.states.iterdir() if (run / _COMPLETE).is_file()]
        return max(whole, key=lambda run: (run / _COMPLETE).stat().st_mtime, default=None)

    @contextlib.contextmanager
    def held(self, identity: dict[str, Any]) -> Iterator[Path | None]:
        """The folder held against other kcm runs while this one lasts (CheckpointError if one holds it), and
        prepared for it (`prepare`): the checkpoint to recover from, None for a new run."""
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(claimed_in_place(self.folder))
            except OutputError as err:
                raise CheckpointError(str(err)) from None
            yield self.prepare(identity)

    def prepare(self, identity: dict[str, Any]) -> Path | None:
        """Before TLC starts: a new run's folder made, with its manifest (refused where a run is kept already), or
        a resumed run's checked against what is asked; the checkpoint to recover from (None: a new run)."""
        manifest = self.folder / MANIFEST
        wanted = {**identity, "fingerprint": FINGERPRINT}
        if not self.resume:
            if manifest.exists():
                raise CheckpointError(f"{self.folder}: holds a checkpointed run already (--resume continues it; "
                                      "another folder starts a new one)")
            try:
                self.states.mkdir(parents=True, exist_ok=True)
                replace(manifest, json.dumps(wanted, indent=2) + "\n")
            except (OSError, OutputError) as err:
                raise CheckpointError(f"{self.folder}: cannot keep a run there: {err}") from None
            return None
        try:
            kept = json.loads(manifest.read_text())
        except FileNotFoundError:
            raise CheckpointError(f"{self.folder}: no checkpointed run to resume (no {MANIFEST})") from None
        except (OSError, json.JSONDecodeError) as err:
            raise CheckpointError(f"{manifest}: unreadable ({err})") from None
        for key, value in wanted.items():
            if kept.get(key) != value:
                raise CheckpointError(f"{manifest}: {key}: the run kept there has {kept.get(key)!r}, not {value!r}")
        latest = self.latest()
        if latest is None and "finished" in kept:
            raise CheckpointError(f"{self.folder}: the run kept there has finished: {kept['finished']}")
        if latest is None:
            raise CheckpointError(f"{self.folder}: the run kept there was stopped before its first checkpoint: start "
                                  "it anew in another folder")
        return latest

    def finish(self, outcome: str) -> None:
        """A run that ended (TLC removes its states then): its outcome in the manifest, for a resume to show."""
        manifest = self.folder / MANIFEST
        kept = json.loads(manifest.read_text())
        replace(manifest, json.dumps({**kept, "finished": outcome}, indent=2) + "\n")
