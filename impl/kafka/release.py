"""The Kafka releases `kcm kafka` runs, and the classpath of each, resolved from Maven Central by Maven.

The jars are Apache Kafka's own, never a copy of ours: `pom.xml` beside this module has one profile per
release, every version pinned (the broker, Kafka's tools, and the logging backend that release's
distribution ships, from its `gradle/dependencies.gradle`), and `mvn dependency:build-classpath` turns a
profile into a classpath of jars in Maven's local repository. The classpath is kept in kcm's cache
(`$XDG_CACHE_HOME/kcm/kafka/`, default `~/.cache`), so only the first start of a release asks Maven.

Which releases: 3.9 is the last line with the ZooKeeper-mode controller, and 3.9.2 its newest release on
Maven Central. 2.4.1 is the oldest ZooKeeper-mode release that runs on Java 17: the brokers of 2.0.1, 2.2.2
and 2.3.1 resolve but cannot reach ZooKeeper on Java 17 (their ZooKeeper clients, 3.4.13 and 3.4.14, fail with
`UnresolvedAddressException` on a loopback address; docs/kafka.md). 2.8.2 is the last of the 2.x line.
Each release also names where its command-line tools live: in the broker's jar (`kafka.admin`) in 2.x, in
`kafka-tools` (`org.apache.kafka.tools`) by 3.7.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from kcm.spec.java import JAVA_MIN, probe_java

POM: Final = Path(__file__).with_name("pom.xml")


class KafkaMissing(Exception):
    """Java, Maven or a release's jars are missing; the one-line message says which and what to do."""


@dataclass(frozen=True, slots=True)
class Release:
    version: str
    topics: str  # the main classes of Kafka's own command-line tools at this release
    reassign: str
    elect: str
    consumer: str
    producer: str = "org.apache.kafka.tools.VerifiableProducer"
    # 2.4.1's ReassignPartitionsCommand.scala requires --zookeeper and writes /admin/reassign_partitions
    # itself; 2.8.2's goes through the admin API (--bootstrap-server), as 3.9.2's does.
    reassign_through_zookeeper: bool = False

    @property
    def line(self) -> str:
        return ".".join(self.version.split(".")[:2])


def _in_tools_jar(version: str) -> Release:
    return Release(version, topics="org.apache.kafka.tools.TopicCommand",
                   reassign="org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                   elect="org.apache.kafka.tools.LeaderElectionCommand",
                   consumer="org.apache.kafka.tools.consumer.ConsoleConsumer")


def _in_broker_jar(version: str, reassign_through_zookeeper: bool = False) -> Release:
    return Release(version, topics="kafka.admin.TopicCommand", reassign="kafka.admin.ReassignPartitionsCommand",
                   elect="kafka.admin.LeaderElectionCommand", consumer="kafka.tools.ConsoleConsumer",
                   reassign_through_zookeeper=reassign_through_zookeeper)


RELEASES: Final = {
    "3.9.2": _in_tools_jar("3.9.2"),
    "2.8.2": _in_broker_jar("2.8.2"),
    "2.4.1": _in_broker_jar("2.4.1", reassign_through_zookeeper=True),
}
DEFAULT_RELEASE: Final = "3.9.2"
OLDEST_RELEASE: Final = "2.4.1"


def release(version: str) -> Release:
    found = RELEASES.get(version)
    if found is None:
        raise KafkaMissing(f"--release {version}: kcm runs Kafka {', '.join(RELEASES)} (ZooKeeper mode; "
                           "docs/kafka.md says why not the others)")
    return found


@cache
def java() -> str:
    """The java binary, 17 or newer, or KafkaMissing."""
    java = probe_java()
    if java.binary is None:
        raise KafkaMissing(f"java not found (Kafka's brokers need Java {JAVA_MIN} here): "
                           "install: apt-get install openjdk-17-jre-headless")
    if not java.usable:
        raise KafkaMissing(f"{java.binary} is Java {java.major or '?'}, kcm runs Kafka on Java {JAVA_MIN}+: "
                           "install: apt-get install openjdk-17-jre-headless")
    binary = java.binary
    return binary


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kcm" / "kafka"


def classpath(version: str, resolve: bool = True) -> str:
    """The classpath of `version`'s broker and tools: from kcm's cache when every jar it names is still in
    Maven's repository, else from Maven (when `resolve`), else KafkaMissing."""
    release(version)
    cached = cache_dir() / f"{version}.classpath"
    if cached.is_file():
        jars = cached.read_text().strip()
        if jars and all(Path(jar).is_file() for jar in jars.split(os.pathsep)):
            return jars
    if not resolve:
        raise KafkaMissing(f"Kafka {version}'s jars are not fetched yet: run kcm kafka fetch --release {version}")
    return _resolve(version, cached)


def _resolve(version: str, cached: Path) -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaMissing(f"mvn not found (kcm fetches Kafka {version}'s jars from Maven Central with it): "
                           "install: apt-get install maven")
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".partial")
    done = subprocess.run(
        [mvn, "-q", "-B", "-f", str(POM), "-P", f"kafka-{version}", "dependency:build-classpath",
         f"-Dmdep.outputFile={partial}"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not partial.is_file():
        reason = next((line.strip() for line in (done.stdout + done.stderr).splitlines()
                       if "ERROR" in line and "Could not" in line), f"mvn exited {done.returncode}")
        raise KafkaMissing(f"Kafka {version}: Maven could not resolve its jars ({_plain(reason)[:200]})")
    partial.replace(cached)
    return cached.read_text().strip()


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text).replace("[ERROR] ", "")
