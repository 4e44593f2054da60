"""kcm.spec.atomic_output: an output is published whole or not at all, by one kcm process at a time."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kcm.spec.atomic_output import TEMP_MARK, OutputError, claimed_file, claimed_folder, open_output, write_output


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".kcm-" in p.name)


def test_a_file_is_published_when_its_block_ends(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with open_output(target) as stream:
        stream.write("half")
        assert not target.exists()
    assert target.read_text() == "half"
    assert _leftovers(tmp_path) == []


def test_a_failed_block_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_output(target, "old\n")
    with pytest.raises(KeyboardInterrupt), open_output(target) as stream:
        stream.write("new, half written")
        raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert _leftovers(tmp_path) == []


def test_a_second_writer_is_refused_while_the_first_writes(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with claimed_file(target) as temp:
        temp.write_text("first")
        with pytest.raises(OutputError, match="another kcm process is writing it"), claimed_file(target):
            pass
    # The refusal is between processes too: flock is held by an open file, not by a thread.
    with claimed_file(target) as temp:
        temp.write_text("mine")
        other = subprocess.run(
            [sys.executable, "-c",
             "import sys\nfrom kcm.spec.atomic_output import TEMP_MARK, OutputError, write_output\n"
             "try:\n    write_output(sys.argv[1], 'theirs')\nexcept OutputError as err:\n    print(err)\n",
             str(target)],
            capture_output=True, text=True, check=True)
    assert other.stdout.strip() == f"{target}: another kcm process is writing it"
    assert target.read_text() == "mine"


def test_a_folder_given_for_a_file_and_a_file_for_a_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="it is a folder"), claimed_file(tmp_path):
        pass
    (tmp_path / "f").write_text("")
    with pytest.raises(OutputError, match="is not a folder"), claimed_file(tmp_path / "f" / "x"):
        pass
    with pytest.raises(OutputError, match="it is a file"), claimed_folder(tmp_path / "f"):
        pass


def test_a_folder_is_swapped_in_whole(tmp_path: Path) -> None:
    target = tmp_path / "runs"
    with claimed_folder(target) as building:
        (building / "a").write_text("1")
    with pytest.raises(RuntimeError), claimed_folder(target) as building:
        (building / "b").write_text("2")
        raise RuntimeError("interrupted")
    assert sorted(p.name for p in target.iterdir()) == ["a"]
    with claimed_folder(target) as building:
        (building / "c").write_text("3")
    assert sorted(p.name for p in target.iterdir()) == ["c"]
    assert _leftovers(tmp_path) == []


def test_an_interrupted_sim_leaves_the_old_trace_and_says_one_line(tmp_path: Path) -> None:
    target = tmp_path / "trace.jsonl"
    target.write_text("old\n")
    kcm = subprocess.Popen([sys.executable, "-m", "kcm.tools.cli", "sim", "--seed", "1", "--steps", "10000000",
                            "--progress", "none", "--out", str(target)], stderr=subprocess.PIPE, text=True)
    # Interrupted once it is writing: its temporary file has appeared beside the trace.
    while not any(TEMP_MARK in p.name for p in tmp_path.iterdir()):
        assert kcm.poll() is None
        time.sleep(0.05)
    kcm.send_signal(signal.SIGINT)
    _, stderr = kcm.communicate(timeout=60)
    assert kcm.returncode == 130
    assert stderr.splitlines() == ["kcm: interrupted"]
    assert target.read_text() == "old\n"
    assert _leftovers(tmp_path) == []
