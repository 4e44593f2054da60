"""The Java that TLC, ZooKeeper and Kafka's brokers run on: `$JAVA_HOME/bin/java`, else `java` on the PATH, and
its major version as `java -version` prints it. Each user says in its own words what is missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

JAVA_MIN: Final = 17


@dataclass(frozen=True)
class Java:
    """What was found: the binary (None: none), its major version (None: not told), why it could not run."""

    binary: str | None
    major: int | None = None
    error: str = ""

    @property
    def usable(self) -> bool:
        return self.binary is not None and self.major is not None and self.major >= JAVA_MIN


def probe_java() -> Java:
    java_home = os.environ.get("JAVA_HOME")
    binary = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not binary or not Path(binary).exists():
        return Java(None)
    try:
        banner = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return Java(binary, error=getattr(err, "strerror", None) or str(err))
    found = re.search(r'version "(\d+)(?:\.(\d+))?', banner.stderr + banner.stdout)
    if found is None:
        return Java(binary)
    major = int(found.group(1))
    # Java 8 and older call themselves 1.N.
    return Java(binary, int(found.group(2) or 0) if major == 1 else major)
