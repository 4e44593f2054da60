"""Where commands write files by default: one folder, `kcm-out/` in the working directory (or the folder
named by KCM_OUT), one subfolder per command. Every command that writes a file takes `--out` and prints the
path it wrote; README.md ("Files a command writes") gives the reasons for this convention."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_ROOT = "kcm-out"


def default_out(command: str, name: str = "") -> Path:
    """The default path of a file (or, with no name, the folder) that `command` writes."""
    folder = Path(os.environ.get("KCM_OUT") or DEFAULT_ROOT) / command
    return folder / name if name else folder
