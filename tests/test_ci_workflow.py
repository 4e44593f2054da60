"""docs/ci.md's GitHub Actions workflow, run step by step without GitHub: on a pull request of a repository of
design folders, the `uses:` steps by their local equivalents, every `run:` step as written, in order, with the
environment GitHub gives a step; a failed step skips the rest but for `if: always()`, as on GitHub."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_diff import HOOK, design_repository, git

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ci.md"


@dataclass
class Step:
    name: str
    uses: str | None = None
    run: str | None = None
    condition: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def workflow_steps(doc: str) -> list[Step]:
    """The steps of the first YAML block after the "GitHub Actions" heading (the subset of YAML it is
    written in: `- name:` items with `uses:`, `if:`, `with:` and `run:` blocks)."""
    section = doc[doc.index("## GitHub Actions"):]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    lines = block.group(1).splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "steps:") + 1
    indent = len(lines[start]) - len(lines[start].lstrip())
    steps: list[Step] = []
    i = start
    while i < len(lines):
        line = lines[i]
        depth = len(line) - len(line.lstrip())
        if not line.strip():
            i += 1
            continue
        if depth < indent:
            break
        text = line.strip()
        if depth == indent and text.startswith("- "):
            steps.append(Step(""))
            text = text[2:]
        key, _, value = text.partition(":")
        value = value.strip()
        step = steps[-1]
        if key == "run" and value == "|":
            body = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent + 2):
                body.append(lines[i])
                i += 1
            step.run = textwrap.dedent("\n".join(body)).strip() + "\n"
            continue
        if key == "name":
            step.name = value
        elif key == "uses":
            step.uses = value
        elif key == "if":
            step.condition = value.strip("\"")
        elif key == "run":
            step.run = value + "\n"
        elif key != "with":
            step.options[key] = value.strip('"')
        i += 1
    return steps


def kcm_source(folder: Path) -> Path:
    """The checkout's tracked files, copied: pip builds a local folder in place, and its build/ would meet the
    compiled install `.ci/run` makes from the checkout."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, folder / name)
    return folder


def python_with_kcms_dependencies(folder: Path) -> Path:
    """actions/setup-python, locally: a fresh virtual environment that sees the dependencies of this one (so
    that `pip install` installs kcm itself, not its hundreds of megabytes of dependencies again)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    subprocess.run([str(folder / "bin" / "python"), "-m", "ensurepip", "--upgrade"], check=True,
                   capture_output=True)
    own = Path(subprocess.run([str(folder / "bin" / "python"), "-c", "import sysconfig; print(sysconfig."
                               "get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    (own / "kcm-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin"


@pytest.mark.tlc
def test_the_documented_workflow_reviews_a_pull_request_that_breaks_a_design(tmp_path: Path) -> None:
    origin = design_repository(tmp_path)
    # The pull request: the second commit on a branch of its own, its break documented in the manifest; main
    # stays at the first.
    manifest = origin / "designs" / "follower-truncation" / "design.toml"
    git(origin, "branch", "-m", "main")
    git(origin, "checkout", "-qb", "truncate-to-hw")
    manifest.write_text(manifest.read_text().replace("expected = []", 'expected = ["NoCommittedDataLoss"]'))
    git(origin, "commit", "-qam", "the break documented")
    git(origin, "checkout", "-q", "main")
    git(origin, "reset", "-q", "--hard", "HEAD~1")
    assert HOOK + "FALSE" in (origin / "designs" / "follower-truncation" / "FollowerTruncation.tla").read_text()

    steps = workflow_steps(DOC.read_text())
    assert [s.uses.split("@")[0] if s.uses else "run" for s in steps] == [
        "actions/checkout", "actions/setup-python", "actions/setup-java", "actions/cache", "run", "run", "run",
        "actions/upload-artifact"]
    # What GitHub decides of each condition on a pull request, after or without a failed step.
    runs: dict[str | None, Callable[[bool], bool]] = {
        None: lambda failed: not failed, "always()": lambda failed: True, "!cancelled()": lambda failed: True,
        "github.event_name == 'pull_request'": lambda failed: not failed}
    work = tmp_path / "work"
    summary = tmp_path / "summary.md"
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request", "GITHUB_BASE_REF": "main",
           "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(work), "KCM_COMPILE": "0"}
    env.pop("KCM_OUT", None)
    failed = False
    results: dict[str, int] = {}
    outputs: dict[str, str] = {}
    uploaded: list[str] = []
    for step in steps:
        if step.condition not in runs:
            pytest.fail(f"the test cannot evaluate the condition {step.condition!r}")
        if not runs[step.condition](failed):
            continue
        uses = (step.uses or "").split("@")[0]
        if uses == "actions/checkout":
            assert step.options == {"fetch-depth": "0"}
            subprocess.run(["git", "clone", "-q", str(origin), str(work)], check=True)
            git(work, "checkout", "-q", "truncate-to-hw")
        elif uses == "actions/setup-python":
            env["PATH"] = f"{python_with_kcms_dependencies(tmp_path / 'python')}{os.pathsep}{env['PATH']}"
        elif uses == "actions/setup-java":
            assert subprocess.run(["java", "-version"], capture_output=True).returncode == 0
        elif uses == "actions/cache":
            assert step.options["path"] == "kcm-out/cache"  # nothing to restore on a first run
        elif uses == "actions/upload-artifact":
            uploaded = sorted(p.name for p in (work / step.options["path"]).iterdir())
        else:
            assert step.run is not None
            env["KCM_SOURCE"] = str(kcm_source(tmp_path / "kcm-source")) if "KCM_SOURCE" in step.run else ""
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step.run], cwd=work,
                                  env=env, capture_output=True, text=True, timeout=900)
            results[step.name], outputs[step.name] = done.returncode, done.stdout + done.stderr
            failed = failed or done.returncode != 0
    # The diff names the break; verify, run all the same, finds the design breaking the ci model too.
    assert results == {"install kcm": 0, "what the pull request changes": 1, "verify every design": 1}, outputs
    assert uploaded == ["diff.xml", "verify-follower-truncation.xml"]
    diff_output = outputs["what the pull request changes"]
    assert "::error file=designs/follower-truncation/FollowerTruncation.tla,line=1," in diff_output
    assert "**HEAD breaks what BASE held.**" in summary.read_text()
    assert "### kcm verify" in summary.read_text()
    junit = (work / "kcm-out" / "junit" / "diff.xml").read_text()
    assert junit.count("<failure") == 1 and "NoCommittedDataLoss went from holds on BASE to violated" in junit
    verify = (work / "kcm-out" / "junit" / "verify-follower-truncation.xml").read_text()
    assert verify.count("<failure") == 1 and 'name="model ci"' in verify


def kcm_commands(block: str, base_variable: str) -> list[str]:
    """The kcm command lines of a workflow, with the base branch's variable named BASE and a GitLab line's
    continuation and status capture taken off."""
    joined = re.sub(r"\\\n\s*", "", block)
    commands = []
    for line in joined.splitlines():
        text = line.strip().removeprefix("- ").strip()
        if text.startswith("kcm "):
            commands.append(text.replace(base_variable, "BASE").removesuffix("|| status=$?").strip())
    return commands


def test_the_gitlab_workflow_runs_the_github_one_s_kcm_commands() -> None:
    doc = DOC.read_text()
    github = re.search(r"## GitHub Actions.*?```yaml\n(.*?)```", doc, re.S)
    gitlab = re.search(r"## GitLab CI.*?```yaml\n(.*?)```", doc, re.S)
    assert github is not None and gitlab is not None
    ours = kcm_commands(github.group(1), "$GITHUB_BASE_REF")
    assert len(ours) == 2 and ours[0].startswith("kcm diff") and ours[1].startswith("kcm verify")
    assert kcm_commands(gitlab.group(1), "$CI_MERGE_REQUEST_TARGET_BRANCH_NAME") == ours
