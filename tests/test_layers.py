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
    ({"tools/review.py": "from concurrent import futures\n"}, "kcm.tools.review imports concurrent.futures"),
    ({"tools/sim.py": "def f():\n    import multiprocessing.pool\n"}, "kcm.tools.sim imports multiprocessing"),
    ({"tools/hunt.py": "from kcm.conformance.explore.hunt import race\n", "conformance/explore/__init__.py": "",
      "conformance/explore/hunt.py": "def race() -> None: ...\n"},
     "kcm.tools.hunt imports kcm.conformance.explore.hunt.race"),
    ({"tools/hunt.py": "import dataclasses\ndef register(subparsers): ...\n@dataclasses.dataclass(frozen=True)\n"
                       "class HuntResult:\n    seconds: float\n"},
     "kcm.tools.hunt defines the dataclass HuntResult"),
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


# A command module holding review logic, as tools/review.py did before issue 39 (item 7) moved it below tools.
REVIEW_IN_TOOLS = """\
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


@dataclass
class RowResult:
    label: str
    cells: dict[str, str] = field(default_factory=dict)


def review(labels: list[str], workers: int) -> list[RowResult]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(RowResult, labels))


def register(subparsers: object) -> None: ...
"""


def test_a_command_holding_review_logic_breaks_the_rule_of_the_command_line(tmp_path: Path) -> None:
    breaches, _ = check(_tree(tmp_path, {"tools/review.py": REVIEW_IN_TOOLS}))
    assert [str(b).partition(": ")[2] for b in breaches] == [
        "kcm.tools.review defines the dataclass RowResult: a command parses arguments and prints, the records of "
        "the work it runs live below kcm.tools",
        "kcm.tools.review imports concurrent.futures: kcm.tools parses arguments and prints; what runs work side "
        "by side lives below it",
    ]


def test_the_same_logic_below_tools_and_the_benchmarks_measuring_it_keep_the_rules(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"conformance/review.py": REVIEW_IN_TOOLS, "tools/bench/__init__.py": "",
                            "tools/bench/review.py": REVIEW_IN_TOOLS,
                            # A module of kcm.tools that adds no command may keep records of what it prints.
                            "tools/report/__init__.py": "",
                            "tools/report/timeline.py": "from dataclasses import dataclass\n\n"
                                                        "@dataclass\nclass Step:\n    seq: int\n"})
    breaches, _ = check(root)
    assert breaches == []
