"""The state of the Z3 encoding: the protocol's variables (named as `VARIABLES`) for a bounded number of
brokers and one partition, plus the implementation-level (`aux`) and history (`ghost`) variables the
relations need.

A state is a flat map from *leaf* names to z3 constants. Leaf names follow the trace variables:
`leader`, `isr.2`, `hw.1`, `log.1.0.e` (the epoch of broker 1's entry at offset 0), and so on. The model's
brokers are 1 to N, or in step validation the trace's own broker ids (any distinct non-negative integers);
NO_LEADER (-1) means "no broker", NO_EPOCH (-1) "no leader epoch known" (a replica that never heard of the
partition, or forgot after a restart).

Three modes use the same state and relations:

- bounded model checking (`logs="content"`): logs hold up to `capacity` entries `(epoch, record)`;
- induction (`logs="length"`): only log lengths, with unbounded integer epochs and offsets;
- step validation (`validation=True`): no ghosts (the validator keeps history concretely), the messages'
  contents come from the trace's arguments, controller steps are summarised.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from kcm.spec.states import Table
from kcm.spec.vocabulary import NO_LEADER, Knobs
from kcm.spec.z3.solver import Expr, and_, bool_array, bool_const, int_array, int_const, ite, or_, or_all

ROLE_NONE: Final = 0
ROLE_LEADER: Final = 1
ROLE_FOLLOWER: Final = 2
ROLE_NAMES: Final[dict[int, str | None]] = {ROLE_NONE: None, ROLE_LEADER: "leader", ROLE_FOLLOWER: "follower"}
NO_EPOCH: Final = -1
UNSET: Final = NO_LEADER  # a ghost "no leader recorded for this epoch yet"

LogMode = Literal["content", "length"]
HistoryMode = Literal["arrays", "states", "none"]


@dataclass(frozen=True, slots=True)
class Rules:
    """Rules of the encoding that are not design knobs: the universal proofs break each one on purpose
    to show that the proof fails with a model when the rule is wrong."""

    election_order: Literal["assignment", "isr"] = "assignment"
    election_checks_live: bool = True
    leader_epoch_bump: int = 1
    unclean_isr: Literal["leader", "keep"] = "leader"
    # The implementation's valid-previous-state tables, which the table proofs compare with the model's
    # (kcm.spec.states): given by the caller, since the model does not read the implementation. None: the
    # model's own, against which the comparison holds by construction.
    partition_table: Table | None = None
    replica_table: Table | None = None


@dataclass(frozen=True, slots=True)
class Config:
    brokers: int = 3
    # The brokers' ids, when not 1..brokers: step validation names the model's brokers as the trace does.
    broker_ids: tuple[int, ...] = ()
    knobs: Knobs = field(default_factory=Knobs)
    rules: Rules = field(default_factory=Rules)
    logs: LogMode = "content"
    capacity: int = 2
    validation: bool = False
    machines: bool = False
    # Where the history of the state node lives: in ghost arrays (induction), in the earlier states of
    # the unrolling (model checking), or with the caller (step validation keeps it concretely).
    history: HistoryMode = "arrays"
    # Integers as signed bit-vectors of this many bits (bounded model checking), or unbounded (None).
    width: int | None = None

    @property
    def ids(self) -> Sequence[int]:
        return self.broker_ids or range(1, self.brokers + 1)

    def is_broker(self, x: Expr) -> Expr:
        """`x` is one of the model's brokers."""
        ids = self.ids
        if isinstance(ids, range):
            return and_(x >= ids.start, x < ids.stop)
        return or_all(x == b for b in ids)

    def broker_or_none(self, x: Expr) -> Expr:
        """`x` is one of the model's brokers or NO_LEADER."""
        return or_(x == NO_LEADER, self.is_broker(x))

    @property
    def ghosts(self) -> bool:
        return self.history == "arrays"

    @property
    def atomic(self) -> bool:
        """Messages read their sender's current state (model checking); validation reads the trace's
        arguments instead, since the implementation's messages are delayed, dropped and duplicated."""
        return not self.validation


BROKER_LEAVES: Final = (
    "acting_controller_epoch", "alive", "broker_controller_epoch",
    "replica", "role", "local_leader_epoch", "log_len", "hw", "hw_checkpoint", "epoch_start_offset",
    "leader_id", "known_version", "truncating", "registered", "bounced", "horizon",
)
BOOL_BROKER_LEAVES: Final = frozenset({"alive", "replica", "truncating", "registered", "bounced"})


class State:
    """One state of the encoding: z3 constants named `<prefix><leaf>`."""

    def __init__(self, cfg: Config, prefix: str) -> None:
        self.cfg = cfg
        self.prefix = prefix
        self.leaf: dict[str, Expr] = {}
        self.accessed: set[str] | None = None  # when a set: every leaf read through the accessors
        ids = cfg.ids
        self._int("controller")
        self._int("controller_epoch")
        self._bool("assigned")
        for r in ids:
            self._bool(f"assignment.{r}")
        self._bool("node")
        for name in ("leader", "leader_epoch", "partition_controller_epoch", "partition_version"):
            self._int(name)
        for r in ids:
            self._bool(f"isr.{r}")
        for b in ids:
            for name in BROKER_LEAVES:
                (self._bool if name in BOOL_BROKER_LEAVES else self._int)(f"{name}.{b}")
            for r in ids:
                self._bool(f"local_isr.{b}.{r}")
                self._int(f"follower_leo.{b}.{r}")
            if cfg.logs == "content":
                for i in range(cfg.capacity):
                    self._int(f"log.{b}.{i}.e")
                    self._int(f"log.{b}.{i}.r")
            if cfg.machines:
                self._int(f"partition_state.{b}")
                for r in ids:
                    self._int(f"replica_state.{b}.{r}")
        if cfg.ghosts:
            self.leaf["g.epoch_leader"] = int_array(prefix + "g.epoch_leader")
            for name in ("ver_epoch", "ver_leader", "ver_ce"):
                self.leaf[f"g.{name}"] = int_array(f"{prefix}g.{name}")
            for r in ids:
                self.leaf[f"g.ver_isr.{r}"] = bool_array(f"{prefix}g.ver_isr.{r}")
        if cfg.logs == "content" and not cfg.validation:
            self._int("g.next_record")

    @staticmethod
    def leaf_names(brokers: tuple[int, ...]) -> list[str]:
        """The leaves of the validation state (no content, no ghosts, with state machines)."""
        return list(_names_cache(brokers))

    def _int(self, name: str) -> None:
        self.leaf[name] = int_const(self.prefix + name, self.cfg.width)

    def _bool(self, name: str) -> None:
        self.leaf[name] = bool_const(self.prefix + name)

    def __getitem__(self, name: str) -> Expr:
        if self.accessed is not None:
            self.accessed.add(name)
        return self.leaf[name]

    def names(self) -> Iterator[str]:
        return iter(self.leaf)

    # -- readable accessors ------------------------------------------------------------------------------

    def b(self, name: str, broker: int) -> Expr:
        return self[f"{name}.{broker}"]

    def isr(self, r: int) -> Expr:
        return self[f"isr.{r}"]

    def assigned(self, r: int) -> Expr:
        return self[f"assignment.{r}"]

    def local_isr(self, b: int, r: int) -> Expr:
        return self[f"local_isr.{b}.{r}"]

    def fleo(self, b: int, r: int) -> Expr:
        return self[f"follower_leo.{b}.{r}"]

    def entry(self, b: int, i: int) -> tuple[Expr, Expr]:
        return self[f"log.{b}.{i}.e"], self[f"log.{b}.{i}.r"]

    def pick(self, name: str, broker: Expr, default: Expr | int | bool = 0) -> Expr:
        """`name.<broker>` for a symbolic broker id."""
        result: Expr = default
        for b in self.cfg.ids:
            result = ite(broker == b, self[f"{name}.{b}"], result)
        return result

    def isr_has(self, broker: Expr) -> Expr:
        return or_all(and_(broker == r, self.isr(r)) for r in self.cfg.ids)

    def assigned_has(self, broker: Expr) -> Expr:
        return or_all(and_(broker == r, self.assigned(r)) for r in self.cfg.ids)


_NAMES: dict[tuple[int, ...], tuple[str, ...]] = {}


def _names_cache(brokers: tuple[int, ...]) -> tuple[str, ...]:
    found = _NAMES.get(brokers)
    if found is None:
        cfg = Config(brokers=len(brokers), broker_ids=brokers, logs="length", validation=True, machines=True,
                     history="none")
        found = _NAMES[brokers] = tuple(State(cfg, "names.").names())
    return found
