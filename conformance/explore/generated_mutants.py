"""Mutants of the implementation's core made mechanically, by an AST pass of our own, and judged by the named
oracles alone: a measure of the suite that does not depend on the hand-written catalogue (`mutants.CATALOGUE`).

`generate(modules)` parses each core module of impl/ and, for every function and method in it, makes one mutant
per site and operator (`OPERATORS`): comparison swaps, `and`/`or`, `not` removed, an `if`/`while`/ternary
condition forced true or false, an integer constant moved by one, `+`/`-`, `min`/`max`, a `bool` function's
`return` negated, and an assignment, augmented assignment or call statement deleted. Each mutant is the whole
mutated function, unparsed, and is applied by `mutants.apply` like any mutant of the catalogue: recompiled in its
module's namespace, in a forked process of its own.

`judge` runs the routes of `oracles.run_oracles` on one mutant with `SUITE` (lighter than the catalogue's: the
scenario files, 20 simulator runs with the checker, the state-machine campaign; no Z3 step check, no replay) one
at a time, and stops at the first kill by a named invariant or property (`oracles.NAMED`), the only kill this
measure counts: an expected-output diff, a step the model cannot explain, a crash or a timeout is recorded but
does not. A mutant that does not compile or apply is `invalid`, one argued equivalent in `EQUIVALENT` is left
out of the rate, and the rest are judged. Figures and the survivors: docs/mutation.md, "Generated mutants".
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib.util
import multiprocessing
import random
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

from kcm.conformance.explore import oracles
from kcm.conformance.explore.interleaving_campaign import Budget, steered_runs
from kcm.conformance.explore.mutants import Mutant, MutationError, apply
from kcm.conformance.explore.oracles import CRASH, NAMED, ORACLES, Note, Suite
from kcm.conformance.scenario.language import CHECKOUT_SCENARIOS, scenario_files
from kcm.spec.vocabulary import Knobs

PACKAGE: Final = "kcm.impl"
# The pure core: every component takes one event or message and returns what it sends (impl/__init__.py). Left
# out: the adapters (sim/, zookeeper/, kafka/), the embedded store (store.py: ZooKeeper's semantics, not the
# controller's), the refinement mapping the traces are written by (abstraction.py: the observer, not the
# observed), and the plain records and constants (messages.py, zk_paths.py).
CORE_MODULES: Final = tuple(f"{PACKAGE}.{name}" for name in (
    "controller", "controller_context", "controller_store", "design", "election", "partition_state_machine",
    "replica_log", "replica_manager", "replica_state_machine", "request_batch", "states", "topic_deletion"))
# Functions of the core modules that are not the controller's behaviour: `kcm design`'s loader and writer of a
# design folder's strategy module (tests/test_design_folder.py), which no oracle runs (they run the built-in
# Design). The names are checked against the modules (tests/test_generated_mutants.py).
NOT_MUTATED: Final[dict[str, str]] = {
    "design:load_strategy": "loads a design folder's strategy module",
    "design:_line_in": "the line of a design folder's file an error was raised from",
    "design:overridden_points": "the design points a design folder's strategy overrides",
    "design:strategy_source": "writes a new design folder's strategy module",
}

CMP, BOOL, NOT, IF_TRUE, IF_FALSE, PLUS_ONE, MINUS_ONE, ARITH, MINMAX, RETURN_NOT, DELETE = (
    "cmp", "bool", "not", "if-true", "if-false", "const+1", "const-1", "arith", "minmax", "return-not", "delete")
OPERATORS: Final[dict[str, str]] = {
    CMP: "a comparison swapped: < and <=, > and >=, == and !=, in and not in, is and is not",
    BOOL: "and and or swapped",
    NOT: "a `not` removed",
    IF_TRUE: "the condition of an if, while or ternary replaced by True",
    IF_FALSE: "the condition of an if, while or ternary replaced by False",
    PLUS_ONE: "an integer constant plus one",
    MINUS_ONE: "an integer constant minus one (not below zero for a 0)",
    ARITH: "+ and - swapped (numbers; string concatenation is left alone)",
    MINMAX: "min and max swapped",
    RETURN_NOT: "the value a `-> bool` function returns negated",
    DELETE: "an assignment, augmented assignment or call statement replaced by `pass` (not the only binding "
            "of a local, nor a constructor's creation of an attribute: deleting those can only raise "
            "UnboundLocalError or AttributeError)",
}

_SWAPS: Final[dict[type[ast.cmpop], type[ast.cmpop]]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}

# Mutant id -> why it cannot change behaviour. Left out of the rate and listed; each id must be one `generate`
# makes (tests/test_generated_mutants.py), and an equivalent mutant that a named oracle kills is reported.
_LOG_VERSION = ("`log_version` is read by one reader, the trace's abstraction (impl/abstraction.py `_broker_delta`), "
                "which compares it with the value it last saw: bumped by 2 it still changes at every change of the "
                "log and at no other step, so the same leaves are emitted")
_CACHE = ("`leader_states` is a cache of immutable values (PartitionLeaderState, a frozen dataclass compared by "
          "value): {} so every call builds the entry again from the same leadership and assignment, an equal value; "
          "nothing else reads the cache or compares entries by identity")
_CRASHED = ("a crashed replica's {} is never read before it is written again: `crash` sets the role to None, every "
            "reader ({}) requires the leader or follower role, and the only ways to a role, `_become_leader` and "
            "`_become_follower`, write it first{}")
_FAILED = ("`{}.handle` returns the list `failed` only for its callers, and every caller (impl/controller.py, "
           "impl/topic_deletion.py, `trigger_online_state_change`) discards it: the list is never read")
EQUIVALENT: Final[dict[str, str]] = {
    "replica_manager:ReplicaManager._on_fetch_response:const+1:0": _LOG_VERSION,
    "replica_manager:ReplicaManager._truncate:const+1:0": _LOG_VERSION,
    "replica_manager:ReplicaManager.produce:const+1:0": _LOG_VERSION,
    "replica_manager:ReplicaManager._truncate:cmp:0": (
        "with `offset == len(log)` the mutant's `del log[offset:]` removes nothing and only bumps `log_version`: the "
        "abstraction then rebuilds the log's leaf, finds it equal to the one it last emitted, and emits nothing "
        "(`_broker_delta`); the HW line after it is the same in both"),
    "replica_manager:ReplicaManager._maybe_advance_hw:delete:1": (
        "every caller marks the partition dirty itself in the same step, after the call: `_on_leader_and_isr` (after "
        "`_become_leader`), `_record_follower_position`, `produce`, and `shrink_isr` (whose `_write_isr` succeeded "
        "and marked it); `dirty` is read only by the abstraction, after the step"),
    "controller_context:ControllerContext.leader_state:const+1:0": _CACHE.format(
        "`cached[1] is leadership` compares the assignment tuple with a LeaderIsr, never true,"),
    "controller_context:ControllerContext.leader_state:const+1:1": _CACHE.format(
        "`cached[2] is replicas` compares the cached PartitionLeaderState with a tuple, never true,"),
    "controller_context:ControllerContext.leader_state:const-1:0": _CACHE.format(
        "`cached[0] is replicas` compares the cached LeaderIsr with a tuple, never true,"),
    "controller_context:ControllerContext.leader_state:if-false:1": _CACHE.format("the cache is never hit,"),
    "controller_context:ControllerContext.leader_state:delete:0": _CACHE.format("the cache is never filled,"),
    "request_batch:RequestBatch.seal:if-true:1": (
        "with no metadata broker the block builds the metadata tuple and then sends to `metadata_brokers & "
        "epochs.keys()`, the empty set: nothing is sent; its one side effect, `ctx.leader_state` filling its cache "
        "of equal immutable values, changes nothing (see leader_state's cache mutants)"),
    "partition_state_machine:PartitionStateMachine.handle:delete:2": _FAILED.format("PartitionStateMachine"),
    "partition_state_machine:PartitionStateMachine.handle:delete:3": _FAILED.format("PartitionStateMachine"),
    "replica_state_machine:ReplicaStateMachine.handle:delete:2": _FAILED.format("ReplicaStateMachine"),
    "replica_state_machine:ReplicaStateMachine.handle:delete:4": _FAILED.format("ReplicaStateMachine"),
    "replica_manager:Replica.forget_volatile_state:delete:2": _CRASHED.format(
        "`leader_id`", "`wants_to_fetch`, `fetchable`, `send_fetch`, the simulator's `_fetched_leader` after "
        "`wants_to_fetch`", " (`_adopt`)"),
    "replica_manager:Replica.forget_volatile_state:delete:3": _CRASHED.format(
        "`isr`", "`produce`, `_maybe_advance_hw` and `_record_follower_position` of a leader, `lagging_followers`; "
        "the trace reports `local_isr` as None while the role is None", " (`_adopt`)"),
    "replica_manager:Replica.forget_volatile_state:delete:4": _CRASHED.format(
        "`follower_leo`", "`_record_follower_position` after the leader-only fence of `_on_fetch`, "
        "`_maybe_advance_hw` from a leader's paths, the simulator's `behind` of a leader", ""),
    "replica_manager:Replica.forget_volatile_state:delete:5": _CRASHED.format(
        "`last_caught_up`", "`_record_follower_position` and `lagging_followers`, of a leader", ""),
    "replica_manager:Replica.forget_volatile_state:delete:6": _CRASHED.format(
        "`truncating`", "`send_fetch` of a fetchable follower, `_on_fetch_response` and "
        "`_on_offsets_for_leader_epoch_response` after `_current_follower`, the simulator's `behind` after "
        "`wants_to_fetch`; the trace does not carry it", ""),
    "replica_manager:Replica.forget_volatile_state:delete:7": _CRASHED.format(
        "`inflight_since`", "`wants_to_fetch`, `fetchable`, `_current_follower`; `expire_requests` reads it in "
        "any role but only to set it to None", " (`_adopt`)"),
}


def short(module: str) -> str:
    """`kcm.impl.replica_manager` -> `replica_manager`."""
    return module.removeprefix(f"{PACKAGE}.")


def qualified(module: str) -> str:
    return module if "." in module else f"{PACKAGE}.{module}"


def operator_of(mutant: Mutant) -> str:
    return mutant.name.split(":")[2]


def module_source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise MutationError(f"{module}: no Python source to mutate (a compiled install; mutate from a source checkout)")
    return Path(spec.origin).read_text(encoding="utf-8")


# -- the AST pass ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Site:
    """One edit of the tree: `do` makes it and returns the (old, new) snippets, `undo` restores the tree."""

    operator: str
    line: int
    do: Callable[[], tuple[str, str]]
    undo: Callable[[], None]


def _functions(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef]]:
    """The functions and methods `mutants._resolve` can reach ("function", "Class.method"), in source order.
    A property's setter shares its getter's name, so both are left out; nested functions belong to theirs."""
    names = Counter(node.name for node in body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield from _functions(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef) and names[node.name] == 1 and node.name != "__repr__":
            yield f"{prefix}{node.name}", node


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _integer(node: ast.AST) -> int | None:
    """The value of an integer literal (`-1` included), None for anything else (booleans among it)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _integer(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _self_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _literal(value: int) -> ast.expr:
    return ast.Constant(value) if value >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value))


def _bindings(function: ast.FunctionDef) -> Counter[str]:
    """How often each local name of the function is bound (parameters count once)."""
    bound: Counter[str] = Counter(a.arg for a in (*function.args.posonlyargs, *function.args.args,
                                                   *function.args.kwonlyargs))
    for extra in (function.args.vararg, function.args.kwarg):
        if extra is not None:
            bound[extra.arg] += 1
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound[node.id] += 1
    return bound


class _Sites:
    """The mutation sites of one function, in a fixed walk of its tree."""

    def __init__(self, function: ast.FunctionDef) -> None:
        self.sites: list[_Site] = []
        self.bound = _bindings(function)
        # A constructor's `self.x = ...` creates the attribute: deleting it can only raise AttributeError.
        self.creations = {id(node) for node in function.body if function.name == "__init__"
                          and isinstance(node, ast.Assign | ast.AnnAssign)
                          and all(_self_attribute(t) for t in (node.targets if isinstance(node, ast.Assign)
                                                               else [node.target]))}
        self.returns_bool: list[bool] = []
        self._function(function)

    # Replacing a child: the parent's field, or one slot of its list.
    def _replace(self, operator: str, line: int, parent: ast.AST, name: str, index: int | None,
                 new: ast.AST, shown: Callable[[ast.AST], str] = ast.unparse) -> None:
        old = getattr(parent, name) if index is None else getattr(parent, name)[index]

        def put(node: ast.AST) -> None:
            if index is None:
                setattr(parent, name, node)
            else:
                getattr(parent, name)[index] = node

        def do() -> tuple[str, str]:
            before = shown(old)
            put(new)
            return before, shown(new)

        self.sites.append(_Site(operator, line, do, lambda: put(old)))

    def _attribute(self, operator: str, line: int, node: ast.AST, name: str, new: Any,
                   shown: Callable[[], str]) -> None:
        old = getattr(node, name)

        def do() -> tuple[str, str]:
            before = shown()
            setattr(node, name, new)
            return before, shown()

        self.sites.append(_Site(operator, line, do, lambda: setattr(node, name, old)))

    def _function(self, function: ast.FunctionDef | ast.Lambda) -> None:
        if isinstance(function, ast.Lambda):
            self._expr_field(function, "body")
            return
        returns = function.returns
        self.returns_bool.append((isinstance(returns, ast.Name) and returns.id == "bool")
                                 or (isinstance(returns, ast.Constant) and returns.value == "bool"))
        body = function.body[1:] if function.body and _is_docstring(function.body[0]) else function.body
        offset = len(function.body) - len(body)
        for index, statement in enumerate(body, offset):
            self._statement(function, "body", index, statement)
        self.returns_bool.pop()

    def _block(self, parent: ast.AST, name: str) -> None:
        for index, statement in enumerate(getattr(parent, name)):
            self._statement(parent, name, index, statement)

    def _statement(self, parent: ast.AST, name: str, index: int, node: ast.stmt) -> None:
        if isinstance(node, ast.Assert | ast.Raise | ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal
                      | ast.Pass | ast.Break | ast.Continue | ast.ClassDef):
            return  # assertions, error messages and declarations: nothing the controller decides
        if isinstance(node, ast.FunctionDef):
            self._function(node)
            return
        if self._deletable(node):
            self._replace(DELETE, node.lineno, parent, name, index, ast.Pass(),
                          lambda n: ast.unparse(n).splitlines()[0])
        if isinstance(node, ast.If | ast.While):
            self._condition(node, "test")
            self._expr_field(node, "test")
            self._block(node, "body")
            self._block(node, "orelse")
            return
        if isinstance(node, ast.Return) and node.value is not None and self.returns_bool[-1]:
            value = node.value
            negated = (ast.Constant(not value.value) if isinstance(value, ast.Constant)
                       else value.operand if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
                       else ast.UnaryOp(ast.Not(), value))
            self._replace(RETURN_NOT, node.lineno, node, "value", None, negated)
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub) and not _is_text(node.value):
            swapped: ast.operator = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
            self._attribute(ARITH, node.lineno, node, "op", swapped, lambda: ast.unparse(node))
        for child_name, value in ast.iter_fields(node):
            if child_name == "annotation":
                continue
            if isinstance(value, list):
                if value and isinstance(value[0], ast.stmt):
                    self._block(node, child_name)
                else:
                    for child_index, child in enumerate(value):
                        if isinstance(child, ast.expr):
                            self._expr(node, child_name, child_index, child)
                        elif isinstance(child, ast.withitem | ast.excepthandler):
                            self._other(child)
            elif isinstance(value, ast.expr):
                self._expr(node, child_name, None, value)

    def _other(self, node: ast.AST) -> None:
        """A `with` item or an `except` clause: their expressions and body."""
        for child_name, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._block(node, child_name)
            elif isinstance(value, ast.expr) and child_name != "type":  # the exception class caught
                self._expr(node, child_name, None, value)

    def _deletable(self, node: ast.stmt) -> bool:
        if id(node) in self.creations:
            return False
        if isinstance(node, ast.Expr):
            return isinstance(node.value, ast.Call)
        if isinstance(node, ast.AugAssign):
            return True
        if isinstance(node, ast.AnnAssign):
            return node.value is not None and not isinstance(node.target, ast.Name)
        if isinstance(node, ast.Assign):
            names = [n.id for target in node.targets for n in ast.walk(target) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Store)]
            return all(self.bound[n] > 1 for n in names)
        return False

    def _condition(self, node: ast.If | ast.While | ast.IfExp, name: str) -> None:
        test = getattr(node, name)
        if isinstance(test, ast.Constant):
            return
        line = test.lineno
        self._replace(IF_TRUE, line, node, name, None, ast.Constant(True))
        self._replace(IF_FALSE, line, node, name, None, ast.Constant(False))

    def _expr_field(self, parent: ast.AST, name: str) -> None:
        self._expr(parent, name, None, getattr(parent, name))

    def _expr(self, parent: ast.AST, name: str, index: int | None, node: ast.expr) -> None:
        if _is_text(node):
            return  # strings: messages and names, and the numbers formatted into them
        value = _integer(node)
        if value is not None:
            for operator, moved in ((PLUS_ONE, value + 1), (MINUS_ONE, value - 1)):
                if value == 0 and moved < 0:
                    continue
                self._replace(operator, node.lineno, parent, name, index, _literal(moved))
            return
        line = node.lineno
        if isinstance(node, ast.Compare):
            for position, op in enumerate(node.ops):
                self._compare(node, position, op)
        elif isinstance(node, ast.BoolOp):
            swapped: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self._attribute(BOOL, line, node, "op", swapped, lambda: ast.unparse(node))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._replace(NOT, line, parent, name, index, node.operand)
        elif isinstance(node, ast.IfExp):
            self._condition(node, "test")
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub)
              and not _is_text(node.left) and not _is_text(node.right)):
            arith: ast.operator = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
            self._attribute(ARITH, line, node, "op", arith, lambda: ast.unparse(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            other = "max" if node.func.id == "min" else "min"
            self._attribute(MINMAX, line, node.func, "id", other, lambda: ast.unparse(node))
        elif isinstance(node, ast.Lambda):
            self._function(node)
            return
        for child_name, value in ast.iter_fields(node):
            if isinstance(value, list):
                for child_index, child in enumerate(value):
                    if isinstance(child, ast.expr):
                        self._expr(node, child_name, child_index, child)
                    elif isinstance(child, ast.comprehension | ast.keyword):
                        self._generic(child)
            elif isinstance(value, ast.expr):
                self._expr(node, child_name, None, value)

    def _generic(self, node: ast.AST) -> None:
        """A comprehension's `for` or a keyword argument: its expressions."""
        for child_name, value in ast.iter_fields(node):
            if isinstance(value, list):
                for child_index, child in enumerate(value):
                    if isinstance(child, ast.expr):
                        self._expr(node, child_name, child_index, child)
            elif isinstance(value, ast.expr):
                self._expr(node, child_name, None, value)

    def _compare(self, node: ast.Compare, position: int, op: ast.cmpop) -> None:
        new = _SWAPS[type(op)]()
        ops = node.ops

        def do() -> tuple[str, str]:
            before = ast.unparse(node)
            ops[position] = new
            return before, ast.unparse(node)

        def undo() -> None:
            ops[position] = op

        self.sites.append(_Site(CMP, node.lineno, do, undo))


def module_mutants(module: str) -> list[Mutant]:
    """Every mutant of one module, in source order: id `module:target:operator:ordinal`, the ordinal counted
    per function and operator."""
    module = qualified(module)
    tree = ast.parse(module_source(module))
    found: list[Mutant] = []
    for target, function in _functions(tree.body):
        if f"{short(module)}:{target}" in NOT_MUTATED:
            continue
        function = copy.deepcopy(function)
        original = ast.unparse(function)
        ordinals: Counter[str] = Counter()
        for site in _Sites(function).sites:
            before, after = site.do()
            source = ast.unparse(function)
            site.undo()
            if source == original:
                continue
            ordinal = ordinals[site.operator]
            ordinals[site.operator] += 1
            name = f"{short(module)}:{target}:{site.operator}:{ordinal}"
            idea = f"line {site.line}: {_one_line(before)} -> {_one_line(after)}"
            found.append(Mutant(name, module, target, before, after, idea, source=source + "\n"))
        assert ast.unparse(function) == original, f"{module}.{target}: a site did not restore the tree"
    return found


def _one_line(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _key(mutant: Mutant) -> tuple[str, str, str, int]:
    module, target, operator, ordinal = mutant.name.split(":")
    return module, target, operator, int(ordinal)


def generate(modules: Iterable[str] = CORE_MODULES, limit: int | None = None, seed: int = 0) -> list[Mutant]:
    """Every mutant of the modules, sorted by id; with `limit`, a sample of that many, drawn by `seed` and
    stratified by module (each module's share in proportion to its mutants, largest remainders first)."""
    by_module = {qualified(m): module_mutants(m) for m in dict.fromkeys(modules)}
    everything = sorted((m for found in by_module.values() for m in found), key=_key)
    if limit is None or limit >= len(everything):
        return everything
    return sorted(_stratified(by_module, max(limit, 0), seed), key=_key)


def _stratified(by_module: dict[str, list[Mutant]], limit: int, seed: int) -> list[Mutant]:
    total = sum(len(found) for found in by_module.values())
    exact = {module: limit * len(found) / total for module, found in by_module.items()}
    shares = {module: int(share) for module, share in exact.items()}
    # Largest remainders first, ties by module name: the shares add up to the limit.
    for module in sorted(exact, key=lambda m: (shares[m] - exact[m], m))[: limit - sum(shares.values())]:
        shares[module] += 1
    picked: list[Mutant] = []
    for module, found in sorted(by_module.items()):
        picked.extend(random.Random(f"{seed}:{module}").sample(found, shares[module]))
    return picked


# -- the judging ------------------------------------------------------------------------------------------------

# What each generated mutant runs: the scenario files, seeds 1-20 of the simulator (3,000 steps, calm phases
# every 300, the checker on each) and the state-machine campaign (40 examples of at most 30 rules). No Z3 step
# check and no replay: they are not named oracles. Cost and budget: docs/mutation.md, "Generated mutants".
SUITE: Final = Suite(seeds=tuple(range(1, 21)), sim_steps=3000, validated=0, examples=40, steps=30)
TIMEOUT: Final = 300.0  # seconds a mutant may run before it is stopped (a loop it made endless)
TARGET: Final = 0.90
KILLED, SURVIVED, INVALID, EQUIVALENT_STATUS = "killed", "survived", "invalid", "equivalent"


@dataclass
class Judgement:
    mutant: Mutant
    kills: dict[str, str] = field(default_factory=dict)  # oracle -> its first evidence, until a named one
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    invalid: str = ""  # why it does not compile or apply
    error: str = ""  # what stopped its oracles: an exception none of them catches, or the timeout

    @property
    def named(self) -> bool:
        """Killed by a named invariant or progress property: the only kill this measure counts."""
        return not self.invalid and any(oracle in NAMED for oracle in self.kills)

    @property
    def status(self) -> str:
        if self.invalid:
            return INVALID
        if self.mutant.name in EQUIVALENT:
            return EQUIVALENT_STATUS
        return KILLED if self.named else SURVIVED

    @property
    def by(self) -> str:
        """The strongest evidence, named oracles first; what stopped the run when nothing else."""
        shown = next((f"{oracle}: {self.kills[oracle]}" for oracle in ORACLES if oracle in self.kills), "")
        return shown or self.error or self.invalid

    def to_json(self) -> dict[str, Any]:
        return {"id": self.mutant.name, "module": short(self.mutant.module), "target": self.mutant.target,
                "operator": operator_of(self.mutant), "idea": self.mutant.idea, "status": self.status,
                "named": self.named, "by": self.by,
                "oracles": {oracle: self.kills[oracle] for oracle in ORACLES if oracle in self.kills},
                "error": self.error, "invalid": self.invalid,
                "seconds": round(self.seconds, 2), "cpu_seconds": round(self.cpu_seconds, 2)}


class _Timeout(BaseException):
    """Raised by the alarm in a mutant's process: a BaseException, so no oracle's `except Exception` takes it
    for the mutant's crash and carries on."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Timeout


def compile_error(mutant: Mutant) -> str:
    """Why the mutated source does not compile; "" when it does."""
    try:
        compile(mutant.source or "", f"<mutant {mutant.name}>", "exec")
    except SyntaxError as err:
        return f"SyntaxError: {err.msg} (line {err.lineno})"
    return ""


def routes(suite: Suite) -> Iterator[tuple[str, Callable[[Note], None]]]:
    """The routes of `oracles.run_oracles` one at a time, in its order, as (name, run): each scenario file, each
    simulator run (never validated: the step check is not a named oracle), the campaign. No replay."""
    for path in scenario_files(CHECKOUT_SCENARIOS):
        yield f"scenario {path.name}", functools.partial(oracles._scenario, path)
    for seed in suite.seeds:
        yield f"simulation seed {seed}", functools.partial(_simulation, seed, suite)
    yield "campaign", functools.partial(oracles._campaign, suite)
    yield "interleavings", functools.partial(_interleavings, suite)


def _interleavings(suite: Suite, note: Note) -> None:
    """The steered interleaving campaign (docs/interleavings.md): a fault at each step of each long operation,
    every invariant throughout and each operation's progress property after it; one steered run per simulator
    seed of the suite, at most the default budget's."""
    budget = Budget(runs=min(Budget.runs, len(suite.seeds)))
    for run, seq, name in steered_runs(Knobs(), budget).violations:
        note(oracles.oracle_of(name), f"{name} (interleaving run {run}, seq {seq})")


def _simulation(seed: int, suite: Suite, note: Note) -> None:
    oracles._simulation(seed, suite, note, validate=False)


def run_named(suite: Suite, stop_at_named: bool = True) -> tuple[dict[str, str], str]:
    """The oracles on the implementation as loaded, route by route, until a named oracle kills it (or every
    route has run): oracle -> its first evidence, and what stopped a route the oracles do not catch (the first
    exception, noted as a crash, and the routes after it still run)."""
    kills: dict[str, str] = {}
    uncaught = ""

    def note(oracle: str, evidence: str) -> None:
        kills.setdefault(oracle, evidence)

    for name, run in routes(suite):
        try:
            run(note)
        except Exception as err:  # what the mutant breaks outside the route's own handling
            uncaught = uncaught or f"{name}: uncaught {type(err).__name__}: {_one_line(str(err))}"
            note(CRASH, uncaught)
        if stop_at_named and NAMED & kills.keys():
            break
    return kills, uncaught


def judge(mutant: Mutant, suite: Suite = SUITE, timeout: float = TIMEOUT) -> Judgement:
    """Applies the mutant in this process and runs the oracles on it until a named one kills it; meant for a
    process of its own."""
    started, cpu = time.perf_counter(), time.process_time()
    result = Judgement(mutant, invalid=compile_error(mutant))
    if result.invalid:
        return result
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            apply(mutant)
        except Exception as err:  # whatever the mutated definition raises as it is made
            result.invalid = f"{type(err).__name__}: {err}"
            return result
        result.kills, result.error = run_named(suite)
    except _Timeout:
        result.error = f"timed out after {timeout:.0f} s"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        result.seconds, result.cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    return result


def _judge_args(args: tuple[Mutant, Suite, float]) -> Judgement:
    return judge(*args)


def run_generated(mutants: Iterable[Mutant], processes: int = 2, suite: Suite = SUITE, timeout: float = TIMEOUT,
                  on_result: Callable[[Judgement], None] | None = None) -> list[Judgement]:
    """Every mutant judged in a fresh forked process (one task per process, so no patch outlives its mutant),
    returned in the order given."""
    mutants = list(mutants)
    context = multiprocessing.get_context("fork")
    results: list[Judgement] = []
    with context.Pool(processes, maxtasksperchild=1) as pool:
        for result in pool.imap_unordered(_judge_args, [(m, suite, timeout) for m in mutants]):
            results.append(result)
            if on_result is not None:
                on_result(result)
    order = {m.name: i for i, m in enumerate(mutants)}
    return sorted(results, key=lambda r: order[r.mutant.name])


def baseline(suite: Suite = SUITE) -> Judgement:
    """The unmutated implementation under the same suite, in a process of its own: its time is what a mutant's
    is compared with, and it must be killed by nothing."""
    unchanged = Mutant("unmutated", f"{PACKAGE}.election", "_first", "", "", "the implementation as it is",
                       source=None)
    context = multiprocessing.get_context("fork")
    with context.Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(_baseline, (unchanged, suite))


def _baseline(mutant: Mutant, suite: Suite) -> Judgement:
    started, cpu = time.perf_counter(), time.process_time()
    kills, error = run_named(suite, stop_at_named=False)
    return Judgement(mutant, kills, error=error, seconds=time.perf_counter() - started,
                     cpu_seconds=time.process_time() - cpu)


# -- the score ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Score:
    judgements: list[Judgement]
    generated: int  # mutants of the modules, before any sample

    def _of(self, status: str, module: str | None = None) -> list[Judgement]:
        return [j for j in self.judgements if j.status == status and module in (None, short(j.mutant.module))]

    @property
    def modules(self) -> list[str]:
        return sorted({short(j.mutant.module) for j in self.judgements})

    def counts(self, module: str | None = None) -> dict[str, Any]:
        run = [j for j in self.judgements if module in (None, short(j.mutant.module))]
        killed, survived = len(self._of(KILLED, module)), len(self._of(SURVIVED, module))
        judged = killed + survived
        return {"run": len(run), "invalid": len(self._of(INVALID, module)),
                "equivalent": len(self._of(EQUIVALENT_STATUS, module)), "judged": judged, "killed": killed,
                "rate": round(killed / judged, 4) if judged else 0.0}

    @property
    def rate(self) -> float:
        return float(self.counts()["rate"])

    @property
    def survivors(self) -> list[Judgement]:
        """Sorted by module, then by id."""
        return sorted(self._of(SURVIVED), key=lambda j: _key(j.mutant))

    @property
    def contradicted(self) -> list[str]:
        """Equivalent mutants that a named oracle killed: their argument is wrong."""
        return [j.mutant.name for j in self._of(EQUIVALENT_STATUS) if j.named]

    def to_json(self) -> dict[str, Any]:
        totals = self.counts()
        by_oracle = {oracle: sum(oracle in j.kills for j in self.judgements if j.status != INVALID)
                     for oracle in ORACLES}
        return {"generated": self.generated, **totals, "target": TARGET, "met": totals["rate"] >= TARGET,
                "killed_unnamed": sum(1 for j in self._of(SURVIVED) if j.kills),
                "stopped": sum(1 for j in self._of(SURVIVED) if j.error),
                "by_oracle": by_oracle,
                "by_module": {module: self.counts(module) for module in self.modules},
                "survivors": [j.mutant.name for j in self.survivors],
                "equivalents": [{"id": j.mutant.name, "why": EQUIVALENT[j.mutant.name], "named": j.named}
                                for j in self._of(EQUIVALENT_STATUS)],
                "contradicted": self.contradicted,
                "invalid_mutants": [{"id": j.mutant.name, "why": j.invalid} for j in self._of(INVALID)],
                "cpu_seconds": round(sum(j.cpu_seconds for j in self.judgements), 1),
                "mutants": [j.to_json() for j in self.judgements]}
