"""The install ships every package of the product: a package folder missing from pyproject.toml's list
imports in the checkout (editable) and is absent from a regular install."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"spec": "kcm.spec", "impl": "kcm.impl", "conformance": "kcm.conformance", "tools": "kcm.tools"}
# Benchmarks run from a checkout against any installed kcm (tools/bench/run.py); they are not installed.
NOT_INSTALLED = {"kcm.tools.bench"}


def test_every_package_folder_is_installed() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {
        ".".join([FOLDERS[init.relative_to(ROOT).parts[0]], *init.relative_to(ROOT).parts[1:-1]])
        for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")
    }
    assert found - NOT_INSTALLED == listed
