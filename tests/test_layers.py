"""The layering rules (kcm.tools.layers): they hold on the checkout, and each kind of breach is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcm.tools.layers import check, main

CHECKOUT = Path(__file__).resolve().parents[1]


def test_the_checkout_keeps_the_layering_rules() -> None:
    breaches, graph = check(CHECKOUT)
    assert [str(b) for b in breaches] == []
    assert graph.number_of_nodes() > 50


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for folder in ("spec", "impl", "conformance", "tools"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(("files", "expected"), [
    ({"spec/model.py": "def f():\n    from kcm.impl.core import x\n", "impl/core.py": "x = 1\n"},
     "kcm.spec.model imports kcm.impl.core: kcm.spec may not import from kcm.impl"),
    ({"impl/core.py": "from kcm.conformance import oracle\n", "conformance/oracle.py": ""},
     "kcm.impl.core imports kcm.conformance.oracle"),
    ({"tools/cli.py": "from kcm.tools.bench import fast\n", "tools/bench/__init__.py": "",
      "tools/bench/fast.py": ""},
     "kcm.tools.cli imports kcm.tools.bench.fast: kcm.tools may not import from kcm.tools.bench"),
    ({"impl/a.py": "from kcm.impl.b import _hidden\n", "impl/b.py": "_hidden = 1\n"},
     "kcm.impl.a imports the private name _hidden of kcm.impl.b"),
    ({"impl/a.py": "from kcm.spec.z3 import _solver\n", "spec/z3/__init__.py": "", "spec/z3/_solver.py": ""},
     "kcm.impl.a imports kcm.spec.z3._solver, a private module of kcm.spec.z3"),
    ({"conformance/runner.py": "import datadriven\n"}, "kcm.conformance.runner imports the test module datadriven"),
    ({"conformance/runner.py": "RUNNER = 'tests/test_scenarios.py'\n"},
     "kcm.conformance.runner refers to the test file 'tests/test_scenarios.py'"),
    ({"impl/a.py": "from kcm.impl import b\n", "impl/b.py": "def f():\n    from kcm.impl import a\n"},
     "import cycle: kcm.impl.a <-> kcm.impl.b"),
])
def test_each_kind_of_breach_is_named(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    breaches, _ = check(_tree(tmp_path, files))
    assert any(expected in str(b) for b in breaches), [str(b) for b in breaches]


def test_a_private_module_serves_its_own_package(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"spec/z3/__init__.py": "", "spec/z3/_solver.py": "",
                            "spec/z3/model.py": "from kcm.spec.z3._solver import z3\n",
                            "impl/core.py": "from kcm.spec.z3.model import z3\n"})
    breaches, _ = check(root)
    assert breaches == []


def test_the_command_exits_1_on_a_breach_and_2_without_a_checkout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path / "tree", {"spec/model.py": "import kcm.tools.cli\n", "tools/cli.py": ""})
    assert main([str(root)]) == 1
    assert "kcm.spec.model imports kcm.tools.cli" in capsys.readouterr().out
    assert main([str(tmp_path / "empty")]) == 2
