"""The transition relation: one relation per action, named as `ACTIONS` (and as the TLA+ actions).

Each action instance (an action and the broker that takes it) is an `Effect`: labelled guards, the new
value of every leaf it writes (every other leaf keeps its value: the frame), its parameters (message
fields, choices) and, for trace output, its arguments. `Relations` builds them for one pair of states
(s, t); `relation(effect)` is the formula `effect(s, t)`.

Messages. In model checking and induction a message reads its sender's current state (`cfg.atomic`):
a follower fetches from the leader it knows, a broker receives a LeaderAndIsr request that some
controller sent. Requests the controllers sent are kept as history (`g.ver_*`: every version of the
partition's state node, any of which may be delivered late, more than once or never). Which of them a
broker may still take depends on the knob `broker_epoch` (KIP-380). A broker takes no request while
`bounced`, and from a controller's next reading of the registrations on only versions from then on
(`horizon`). With KIP-380 a broker is `bounced` from its new registration on: older requests were
addressed to its earlier registration, which it refuses, and the controller fails a bounced broker before
starting it again. Before 2.2 a request reaches whichever incarnation of the broker is up (the
controller's send thread retries it across a restart); a broker is `bounced` from the moment a controller
finds it dead (removeBroker drops its queue) until one finds it registered, and a restart the controller
missed goes unseen. In step validation the messages' fields come from the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kcm.spec.vocabulary import NO_LEADER
from kcm.spec.z3.elections import ElectionInput
from kcm.spec.z3.elections import offline as offline_election
from kcm.spec.z3.model import NO_EPOCH, ROLE_FOLLOWER, ROLE_LEADER, ROLE_NONE, UNSET, Config, State
from kcm.spec.z3.solver import (
    FALSE,
    TRUE,
    Expr,
    and_,
    and_all,
    bool_const,
    count,
    first,
    implies,
    int_const,
    ite,
    max2,
    min2,
    not_,
    num,
    num_like,
    or_,
    or_all,
    select,
    store,
)

# The actions of the protocol model (model checking and induction), as `Relations.model_instances` makes them.
MODEL_ACTIONS: Final = (
    "BrokerCrash", "BrokerRestart", "SessionExpire", "BrokerReregister", "ControllerElect", "ControllerResign",
    "BrokerChange", "LeaderAndIsr", "Produce", "Fetch", "FetchResponse", "OffsetsForLeaderEpochResponse",
    "IsrShrink", "HwCheckpoint",
)
ERR_NONE: Final = 0
ERR_OUT_OF_RANGE: Final = 1
ERR_OTHER: Final = 2


@dataclass(frozen=True)
class NodeWrite:
    """The partition's state node after a write of a step's sequence (`when` it writes; the node as before
    otherwise)."""

    when: Expr
    leader: Expr
    epoch: Expr
    isr: dict[int, Expr]
    version: Expr


@dataclass
class Effect:
    action: str
    actor: str
    broker: int | None
    guards: list[tuple[str, Expr]] = field(default_factory=list)
    updates: dict[str, Expr] = field(default_factory=dict)
    params: dict[str, Expr] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)
    kind: str = "env"  # env | client | broker | request | controller
    request_ce: Expr | None = None
    applied: Expr | None = None

    @property
    def label(self) -> str:
        return self.action if self.broker is None else f"{self.action}({self.broker})"

    def guard(self, label: str, condition: Expr) -> None:
        self.guards.append((label, condition))


class Relations:
    """Action instances over one pair of states `s` (before) and `t` (after)."""

    def __init__(self, cfg: Config, s: State, t: State, tag: str = "", kept: dict[int, Expr] | None = None,
                 past: list[State] | None = None) -> None:
        self.cfg = cfg
        self.s = s
        self.t = t
        self.tag = tag
        self.past = past if past is not None else [s]  # history "states": every state up to s
        self.kept = kept  # validation: the common prefix of each broker's log before and after the step
        self.knobs = cfg.knobs

    def num(self, value: int) -> Expr:
        return num(value, self.cfg.width)

    # -- plumbing --------------------------------------------------------------------------------------

    def _int(self, e: Effect, name: str) -> Expr:
        v = int_const(f"{self.tag}{e.label}.{name}", self.cfg.width)
        e.params[name] = v
        return v

    def _bool(self, e: Effect, name: str) -> Expr:
        v = bool_const(f"{self.tag}{e.label}.{name}")
        e.params[name] = v
        return v

    def _free(self, e: Effect, leaf: str) -> Expr:
        """Leave a leaf unconstrained by the frame: its new value is whatever the guards allow."""
        e.updates[leaf] = self.t[leaf]
        return self.t[leaf]

    def _kept(self, e: Effect, b: int, expected: Expr) -> None:
        if self.kept is not None:
            e.guard(f"log of {b} keeps its first {expected} entries", self.kept[b] == expected)

    @property
    def ids(self) -> Sequence[int]:
        return self.cfg.ids

    def _write_log(self, e: Effect, b: int, new_len: Expr, kept: Expr,
                   entries: list[tuple[Expr, Expr]] | None = None) -> None:
        e.updates[f"log_len.{b}"] = new_len
        self._kept(e, b, kept)
        if entries is not None and self.cfg.logs == "content":
            for i, (ep, rec) in enumerate(entries):
                e.updates[f"log.{b}.{i}.e"] = ep
                e.updates[f"log.{b}.{i}.r"] = rec

    def _hw_after_advance(self, b: int, hw: Expr, own: Expr, isr: dict[int, Expr], fleo: dict[int, Expr]) -> Expr:
        """`ReplicaManager._maybe_advance_hw`: the HW rises to the lowest log end among the ISR."""
        lowest = own
        for r in self.ids:
            if r != b:
                lowest = ite(and_(isr[r], fleo[r] < lowest), fleo[r], lowest)
        return max2(hw, lowest)

    def _write_node(self, e: Effect, leader: Expr, epoch: Expr, isr: dict[int, Expr], pce: Expr,
                    version: Expr, when: Expr = TRUE) -> None:
        """A write of the partition's state node (controller decision or the leader's ISR change)."""
        self._write_nodes(e, [NodeWrite(when, leader, epoch, isr, version)], pce)

    def _write_nodes(self, e: Effect, writes: Sequence[NodeWrite], pce: Expr, gate: Expr = TRUE) -> None:
        """Writes of the state node one after another in one step, each with what it writes `when` it does;
        none unless `gate`."""
        s = self.s
        node, leader, epoch, version = s["node"], s["leader"], s["leader_epoch"], s["partition_version"]
        written_by = s["partition_controller_epoch"]
        isr = {r: s.isr(r) for r in self.ids}
        ghosts = {name: s[f"g.{name}"] for name in ("epoch_leader", "ver_epoch", "ver_leader", "ver_ce",
                                                      *[f"ver_isr.{r}" for r in self.ids])} if self.cfg.ghosts else {}
        for w in writes:
            when = and_(gate, w.when)
            node, leader, epoch, version = ite(when, TRUE, node), ite(when, w.leader, leader), \
                ite(when, w.epoch, epoch), ite(when, w.version, version)
            written_by = ite(when, pce, written_by)
            isr = {r: ite(when, w.isr[r], isr[r]) for r in self.ids}
            if ghosts:
                # With leader_epoch_bump >= 1 each write of the step has a higher epoch than the one before, so
                # the epoch's first leader is read before the step: the same value, without the chain of stores.
                old = select(s["g.epoch_leader"] if self.cfg.rules.leader_epoch_bump >= 1
                             else ghosts["epoch_leader"], w.epoch)
                claim = ite(old == UNSET, w.leader, old)  # the first broker ever named leader of the epoch
                values = {"epoch_leader": (w.epoch, claim), "ver_epoch": (w.version, w.epoch),
                          "ver_leader": (w.version, w.leader), "ver_ce": (w.version, pce),
                          **{f"ver_isr.{r}": (w.version, w.isr[r]) for r in self.ids}}
                # A write not taken stores back what its index holds: a chain of stores, no choice of arrays.
                for name, (index, value) in values.items():
                    ghosts[name] = store(ghosts[name], index, ite(when, value, select(ghosts[name], index)))
        e.updates.update({"node": node, "leader": leader, "leader_epoch": epoch, "partition_version": version,
                          "partition_controller_epoch": written_by})
        for r in self.ids:
            e.updates[f"isr.{r}"] = isr[r]
        for name, value in ghosts.items():
            e.updates[f"g.{name}"] = value

    def _forget(self, e: Effect, b: int, when: Expr = TRUE) -> None:
        """What a broker forgets about its replica when it crashes (`forget_volatile_state`)."""
        s = self.s
        e.updates[f"role.{b}"] = ite(when, ROLE_NONE, s.b("role", b))
        e.updates[f"local_leader_epoch.{b}"] = ite(when, NO_EPOCH, s.b("local_leader_epoch", b))
        e.updates[f"leader_id.{b}"] = ite(when, NO_LEADER, s.b("leader_id", b))
        e.updates[f"truncating.{b}"] = ite(when, FALSE, s.b("truncating", b))
        for r in self.ids:
            e.updates[f"local_isr.{b}.{r}"] = ite(when, FALSE, s.local_isr(b, r))

    def _drop_context(self, e: Effect, b: int, when: Expr = TRUE) -> None:
        """A controller that resigns or crashes drops its state machines."""
        if self.cfg.machines:
            s = self.s
            e.updates[f"partition_state.{b}"] = ite(when, 0, s.b("partition_state", b))
            for r in self.ids:
                e.updates[f"replica_state.{b}.{r}"] = ite(when, 0, s[f"replica_state.{b}.{r}"])

    # -- the environment ---------------------------------------------------------------------------------

    def stutter(self) -> Effect:
        return Effect("Stutter", "env", None)

    def broker_crash(self, b: int, checkpoint_first: bool = False) -> Effect:
        s = self.s
        e = Effect("BrokerCrash", "env", b, args={"broker": b})
        e.guard(f"broker {b} is alive", s.b("alive", b))
        self._crash_effects(e, b, checkpoint_first)
        return e

    def _crash_effects(self, e: Effect, b: int, checkpoint_first: bool) -> None:
        s = self.s
        e.updates[f"alive.{b}"] = FALSE
        e.updates[f"registered.{b}"] = FALSE
        e.updates[f"broker_controller_epoch.{b}"] = self.num(0)
        e.updates[f"acting_controller_epoch.{b}"] = self.num(0)
        e.updates["controller"] = ite(s["controller"] == b, NO_LEADER, s["controller"])
        self._forget(e, b)
        self._drop_context(e, b)
        replica = s.b("replica", b)
        checkpoint = s.b("hw_checkpoint", b)
        if checkpoint_first:
            checkpoint = ite(replica, s.b("hw", b), checkpoint)
            e.updates[f"hw_checkpoint.{b}"] = checkpoint
        e.updates[f"hw.{b}"] = ite(replica, min2(checkpoint, s.b("log_len", b)), s.b("hw", b))

    def broker_restart(self, b: int) -> Effect:
        s = self.s
        e = Effect("BrokerRestart", "env", b, args={"broker": b})
        e.guard(f"broker {b} is down", not_(s.b("alive", b)))
        e.updates[f"alive.{b}"] = TRUE
        e.updates[f"registered.{b}"] = TRUE
        self._register_again(e, b)
        e.updates[f"hw.{b}"] = ite(s.b("replica", b), min2(s.b("hw_checkpoint", b), s.b("log_len", b)),
                                   s.b("hw", b))
        return e

    def session_expire(self, b: int) -> Effect:
        s = self.s
        e = Effect("SessionExpire", "env", b, args={"broker": b})
        e.guard(f"broker {b} is alive", s.b("alive", b))
        e.updates["controller"] = ite(s["controller"] == b, NO_LEADER, s["controller"])
        e.updates[f"registered.{b}"] = FALSE
        return e

    def broker_reregister(self, b: int) -> Effect:
        """After a session expiry: resign, register again (the controller sees a new registration)."""
        s = self.s
        e = Effect("BrokerReregister", f"broker:{b}", b, kind="broker")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        e.guard(f"broker {b} lost its registration", not_(s.b("registered", b)))
        e.updates[f"registered.{b}"] = TRUE
        self._register_again(e, b)
        e.updates[f"acting_controller_epoch.{b}"] = self.num(0)
        self._drop_context(e, b)
        return e

    # -- the controller ----------------------------------------------------------------------------------

    def _offline_writes(self, live: dict[int, Expr], elect_first: bool) -> list[NodeWrite]:
        """What a controller writes for the partition when it finds brokers failed, write by write: an
        offline election if the leader is gone (`PartitionStateMachine`, a write only if it elects), and
        each failed replica in the ISR, in id order, taken out of it, the last member excepted, and out of
        the leadership (`ReplicaStateMachine._remove_from_isr`: a write each, with a new leader epoch). A
        broker change elects first (`Failure`); a failover removes first (`LoadStartup`, then the
        partition state machine's startup)."""
        s = self.s
        ids = self.ids
        bump = self.cfg.rules.leader_epoch_bump
        cur = NodeWrite(FALSE, s["leader"], s["leader_epoch"], {r: s.isr(r) for r in ids}, s["partition_version"])
        writes: list[NodeWrite] = []

        def then(when: Expr, leader: Expr, isr: dict[int, Expr]) -> NodeWrite:
            return NodeWrite(when, ite(when, leader, cur.leader), ite(when, cur.epoch + bump, cur.epoch),
                             {r: ite(when, isr[r], cur.isr[r]) for r in ids}, ite(when, cur.version + 1, cur.version))

        def elect() -> NodeWrite:
            inp = ElectionInput(
                assignment=[(self.num(r), s.assigned(r)) for r in ids],
                isr=cur.isr,
                isr_position={r: self.num(r) for r in ids},
                live=live,
                shutting_down={r: FALSE for r in ids},
                target=[],
                leader_epoch=cur.epoch,
            )
            outcome = offline_election(inp, self.knobs.unclean_election, self.cfg.rules)
            need = or_(cur.leader == NO_LEADER, not_(or_all(and_(cur.leader == r, live[r]) for r in ids)))
            return then(and_(s["node"], need, outcome.leader != NO_LEADER), outcome.leader, outcome.isr)

        if elect_first:
            cur = elect()
            writes.append(cur)
        for r in ids:
            alone = and_all(not_(cur.isr[q]) for q in ids if q != r)
            isr = {q: ite(alone, cur.isr[q], FALSE) if q == r else cur.isr[q] for q in ids}
            cur = then(and_(s["node"], s.assigned(r), not_(live[r]), cur.isr[r]),
                       ite(cur.leader == r, NO_LEADER, cur.leader), isr)
            writes.append(cur)
        if not elect_first:
            cur = elect()
            writes.append(cur)
        return writes

    def controller_elect(self, b: int) -> Effect:
        """Win the `/controller` race, bump the controller epoch, fail over: elect a leader for the
        partition if it has none and drop failed replicas from the ISR."""
        s = self.s
        e = Effect("ControllerElect", f"broker:{b}", b, kind="broker")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        e.guard("no controller holds /controller", s["controller"] == NO_LEADER)
        epoch = s["controller_epoch"] + 1
        e.updates["controller"] = self.num(b)
        e.updates["controller_epoch"] = epoch
        e.updates[f"acting_controller_epoch.{b}"] = epoch
        live = {r: s.b("registered", r) for r in self.ids}
        self._write_nodes(e, self._offline_writes(live, elect_first=False), epoch)
        self._see_registrations(e)
        e.args = {"elected": True, "controller_epoch": epoch}
        return e

    def controller_resign(self, b: int) -> Effect:
        s = self.s
        e = Effect("ControllerResign", f"controller:{b}", b, kind="controller")
        e.guard(f"broker {b} acts as controller", s.b("acting_controller_epoch", b) != 0)
        e.guard(f"broker {b} no longer holds /controller", s["controller"] != b)
        e.updates[f"acting_controller_epoch.{b}"] = self.num(0)
        self._drop_context(e, b)
        e.args = {"resigned": True}
        return e

    def _register_again(self, e: Effect, b: int) -> None:
        """A new registration of broker b: with KIP-380 its earlier requests are stale from now on."""
        if self.knobs.broker_epoch:
            e.updates[f"bounced.{b}"] = TRUE

    def _see_registrations(self, e: Effect) -> None:
        """A controller reads the registrations: a `bounced` broker it finds registered takes requests
        again, those sent from the state node this step leaves on (`horizon`); before 2.2 a broker it
        finds dead is `bounced` (its queue dropped) until then."""
        s = self.s
        version = e.updates["partition_version"]
        for r in self.ids:
            back = and_(s.b("bounced", r), s.b("registered", r))
            e.updates[f"horizon.{r}"] = ite(back, version, s.b("horizon", r))
            unseen = s.b("bounced", r) if self.knobs.broker_epoch else TRUE
            e.updates[f"bounced.{r}"] = and_(unseen, not_(s.b("registered", r)))

    def broker_change(self, c: int) -> Effect:
        """The controller reads the registered brokers: failed (or restarted) brokers' replicas go
        offline, leaderless partitions get an offline election. A fenced write makes it resign."""
        s = self.s
        e = Effect("BrokerChange", f"controller:{c}", c, kind="controller")
        acting = s.b("acting_controller_epoch", c)
        e.guard(f"broker {c} is alive", s.b("alive", c))
        e.guard(f"broker {c} acts as controller", acting != 0)
        # A deposed controller handles only the broker change it had queued when its session expired (the
        # specification's zombie_events): its own registration's deletion never reaches it, another
        # broker's change must have. Approximated by another broker gone or not yet seen again.
        others = or_all(or_(not_(s.b("registered", r)), s.b("bounced", r)) for r in self.ids if r != c)
        e.guard(f"broker {c}, if deposed, had a broker change queued", implies(not_(s.b("registered", c)), others))
        # Before KIP-380 the controller compares broker ids only: a bounced broker stays live.
        live = {r: and_(s.b("registered", r), not_(s.b("bounced", r)) if self.knobs.broker_epoch else TRUE)
                for r in self.ids}
        writes = self._offline_writes(live, elect_first=True)
        write = or_all(w.when for w in writes)
        fenced = and_(write, acting != s["controller_epoch"]) if self.knobs.controller_epoch_fencing else FALSE
        self._write_nodes(e, writes, acting, gate=not_(fenced))
        e.updates[f"acting_controller_epoch.{c}"] = ite(fenced, 0, acting)
        self._see_registrations(e)
        e.args = {"controller_epoch": acting, "resigned": fenced,
                  "dead": [(r, not_(live[r])) for r in self.ids]}
        return e

    def _decision_summary(self, e: Effect, writer: Expr, may_write: Expr) -> None:
        """Validation: the store and the controller's own state machines change consistently with *some*
        sequence of controller decisions (elections, ISR removals, creation, reassignment, deletion)."""
        s, t = self.s, self.t
        ids = self.ids
        for leaf in ("node", "leader", "leader_epoch", "partition_controller_epoch", "partition_version",
                     "assigned", *[f"isr.{r}" for r in ids], *[f"assignment.{r}" for r in ids]):
            self._free(e, leaf)
        node_changed = or_(t["node"] != s["node"], and_(s["node"], t["node"], or_(
            t["leader"] != s["leader"], t["leader_epoch"] != s["leader_epoch"],
            t["partition_controller_epoch"] != s["partition_controller_epoch"],
            t["partition_version"] != s["partition_version"], *[t.isr(r) != s.isr(r) for r in ids])))
        asg_changed = or_(t["assigned"] != s["assigned"], *[t.assigned(r) != s.assigned(r) for r in ids])
        wrote = or_(node_changed, asg_changed)
        e.guard("the controller may write the store", implies(wrote, may_write))
        isr_sub_asg = and_all(implies(t.isr(r), t.assigned(r)) for r in ids)
        sane = and_(self.cfg.broker_or_none(t["leader"]),
                    or_(t["leader"] == NO_LEADER, t.isr_has(t["leader"])), or_all(t.isr(r) for r in ids),
                    t["assigned"], isr_sub_asg)
        single_leader_isr = and_all(t.isr(r) == (t["leader"] == r) for r in ids)
        clean = and_(and_all(implies(t.isr(r), s.isr(r)) for r in ids),
                     or_(t["leader"] == NO_LEADER, s.isr_has(t["leader"])))
        unclean = and_(t["leader"] != NO_LEADER, single_leader_isr) if self.knobs.unclean_election else FALSE
        grow = and_all(implies(s.assigned(r), t.assigned(r)) for r in ids)
        shrink = and_all(implies(t.assigned(r), s.assigned(r)) for r in ids)
        rewritten = and_(s["node"], t["node"], node_changed)
        e.guard("a controller's write of the partition's state node", implies(rewritten, and_(
            t["leader_epoch"] >= s["leader_epoch"] + 1, t["partition_version"] >= s["partition_version"] + 1,
            t["partition_controller_epoch"] == writer, sane, or_(clean, unclean))))
        e.guard("creation of the partition's state node", implies(and_(not_(s["node"]), t["node"]), and_(
            t["leader_epoch"] >= 0, t["partition_version"] >= 0, t["partition_controller_epoch"] == writer,
            t["leader"] != NO_LEADER, sane)))
        e.guard("deletion removes the topic", implies(and_(s["node"], not_(t["node"])), not_(t["assigned"])))
        e.guard("reassignment grows, then shrinks, the assignment",
                implies(and_(s["assigned"], t["assigned"], asg_changed), or_(grow, shrink)))
        e.guard("an assignment appears only by an admin", implies(not_(s["assigned"]), not_(t["assigned"])))
        e.guard("an unchanged node keeps its ISR within the assignment",
                implies(and_(t["node"], t["assigned"], not_(node_changed)), isr_sub_asg))

    def controller_decision(self, c: int) -> Effect:
        """Validation: any controller event of `controller:c` (BrokerChange, TopicChange, reassignment,
        preferred election, deletion, controlled shutdown, ...)."""
        s = self.s
        e = Effect("ControllerDecision", f"controller:{c}", c, kind="controller")
        acting = s.b("acting_controller_epoch", c)
        fenced_ok = acting == s["controller_epoch"] if self.knobs.controller_epoch_fencing else TRUE
        self._decision_summary(e, acting, and_(acting != 0, fenced_ok))
        new_acting = self._free(e, f"acting_controller_epoch.{c}")
        e.guard("a controller keeps its epoch or resigns", or_(new_acting == acting, new_acting == 0))
        self._machines_free(e, c, resigned=new_acting == 0)
        return e

    def _machines_free(self, e: Effect, c: int, resigned: Expr) -> None:
        if not self.cfg.machines:
            return
        states = [self._free(e, f"partition_state.{c}")]
        states += [self._free(e, f"replica_state.{c}.{r}") for r in self.ids]
        e.guard("a resigning controller drops its state machines", implies(resigned, and_all(x == 0 for x in states)))

    def controller_elect_observed(self, b: int) -> Effect:
        """Validation: a ControllerElect or BrokerReregister event: resign, and/or win the election and
        fail over; or nothing, when another broker holds `/controller`."""
        s = self.s
        e = Effect("ControllerElect", f"broker:{b}", b, kind="broker")
        elected = self._bool(e, "elected")
        epoch = s["controller_epoch"] + 1
        e.guard(f"broker {b} is alive", s.b("alive", b))
        e.guard("an election needs /controller free", implies(elected, s["controller"] == NO_LEADER))
        e.updates["controller"] = ite(elected, self.num(b), s["controller"])
        e.updates["controller_epoch"] = ite(elected, epoch, s["controller_epoch"])
        new_acting = self._free(e, f"acting_controller_epoch.{b}")
        e.guard("the winner acts in the new epoch; otherwise it keeps its epoch or resigns",
                ite(elected, new_acting == epoch,
                    or_(new_acting == s.b("acting_controller_epoch", b), new_acting == 0)))
        self._decision_summary(e, epoch, elected)
        self._machines_free(e, b, resigned=new_acting == 0)
        return e

    # -- requests from the controller, handled by a broker ---------------------------------------------

    def _accept(self, e: Effect, b: int, ce: Expr) -> Expr:
        """The fences: a request addressed to an earlier registration of the broker (KIP-380; known in
        validation only, from the trace: in model checking such a request is never delivered, see `sent`)
        or from a controller epoch older than the newest seen is rejected whole."""
        s = self.s
        bce = s.b("broker_controller_epoch", b)
        fenced = ce < bce if self.knobs.controller_epoch_fencing else FALSE
        refused = self._bool(e, "stale_broker_epoch") if self.knobs.broker_epoch and self.cfg.validation else FALSE
        accepted = not_(or_(refused, fenced))
        e.updates[f"broker_controller_epoch.{b}"] = ite(accepted, max2(bce, ce), bce)
        e.guard("the request comes from a controller epoch that exists", and_(ce >= 0, ce <= s["controller_epoch"]))
        e.request_ce = ce
        e.kind = "request"
        return accepted

    def leader_and_isr(self, b: int) -> Effect:
        s = self.s
        ids = self.ids
        e = Effect("LeaderAndIsr", f"broker:{b}", b)
        ce = self._int(e, "controller_epoch")
        epoch = self._int(e, "leader_epoch")
        leader = self._int(e, "leader")
        version = self._int(e, "version")
        isr = {r: self._bool(e, f"isr.{r}") for r in ids}
        replicas = {r: self._bool(e, f"replicas.{r}") for r in ids}
        included = self._bool(e, "included")
        applied = self._bool(e, "applied")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        accepted = self._accept(e, b, ce)
        e.applied = applied
        e.guard("applied means accepted", applied == accepted)
        sent = and_(included, ce >= 1, version >= s.b("horizon", b), not_(s.b("bounced", b)),
                    *[replicas[r] == s.assigned(r) for r in ids])
        if self.cfg.history == "arrays":
            e.guard("the request carries a version of the state node, sent by its writer or a later controller", and_(
                sent, s["node"], version >= 0, version <= s["partition_version"],
                epoch == select(s["g.ver_epoch"], version), leader == select(s["g.ver_leader"], version),
                ce >= select(s["g.ver_ce"], version),
                *[isr[r] == select(s[f"g.ver_isr.{r}"], version) for r in ids]))
        elif self.cfg.history == "states":
            which = self._int(e, "sent_at")
            e.guard("the request carries the node of an earlier state, sent by its writer or a later controller", and_(
                sent, which >= 0, which < len(self.past),
                *[implies(which == j, and_(p["node"], version == p["partition_version"], epoch == p["leader_epoch"],
                                           leader == p["leader"], ce >= p["partition_controller_epoch"],
                                           *[isr[r] == p.isr(r) for r in ids]))
                  for j, p in enumerate(self.past)]))
        else:
            e.guard("the request's leader epoch is not newer than the store's",
                    implies(and_(included, s["node"]), epoch <= s["leader_epoch"]))
        replica = s.b("replica", b)
        known = s.b("local_leader_epoch", b)
        stale = and_(replica, known != NO_EPOCH, epoch <= known) if self.knobs.leader_epoch_check else FALSE
        # A partition whose new leader is unavailable is left as it is (Kafka's makeFollowers skips it).
        apply = and_(accepted, included, replicas[b], not_(stale), leader != NO_LEADER)
        new = not_(replica)
        length = s.b("log_len", b)
        len0 = ite(new, 0, length)
        hw0 = ite(new, 0, s.b("hw", b))
        as_leader = leader == b
        alone = and_all(not_(isr[r]) for r in ids if r != b)
        hw_leader = ite(alone, max2(hw0, len0), hw0)
        if self.knobs.truncation == "hw":
            len_follower = min2(len0, hw0)
            truncating_follower = FALSE
        else:
            len_follower = len0
            truncating_follower = TRUE
        hw_follower = min2(hw0, len_follower)
        new_len = ite(apply, ite(as_leader, len0, len_follower), length)
        e.updates[f"replica.{b}"] = ite(apply, TRUE, replica)
        role = ite(as_leader, self.num(ROLE_LEADER), self.num(ROLE_FOLLOWER))
        e.updates[f"role.{b}"] = ite(apply, role, s.b("role", b))
        e.updates[f"local_leader_epoch.{b}"] = ite(apply, epoch, known)
        e.updates[f"leader_id.{b}"] = ite(apply, leader, s.b("leader_id", b))
        e.updates[f"known_version.{b}"] = ite(apply, version, s.b("known_version", b))
        e.updates[f"truncating.{b}"] = ite(apply, ite(as_leader, FALSE, truncating_follower), s.b("truncating", b))
        e.updates[f"epoch_start_offset.{b}"] = ite(and_(apply, as_leader), len0, s.b("epoch_start_offset", b))
        e.updates[f"hw.{b}"] = ite(apply, ite(as_leader, hw_leader, hw_follower), s.b("hw", b))
        e.updates[f"hw_checkpoint.{b}"] = ite(and_(apply, new), 0, s.b("hw_checkpoint", b))
        for r in ids:
            e.updates[f"local_isr.{b}.{r}"] = ite(apply, isr[r], s.local_isr(b, r))
            if r != b:
                e.updates[f"follower_leo.{b}.{r}"] = ite(and_(apply, as_leader), -1, s.fleo(b, r))
        self._write_log(e, b, new_len, ite(apply, ite(new, 0, new_len), length))
        e.args = {"controller_epoch": ce, "applied": applied,
                  "partitions": [{"leader": leader, "leader_epoch": epoch, "isr": [(r, isr[r]) for r in ids],
                                  "replicas": [(r, replicas[r]) for r in ids]}]}
        return e

    def update_metadata(self, b: int) -> Effect:
        s = self.s
        e = Effect("UpdateMetadata", f"broker:{b}", b)
        ce = self._int(e, "controller_epoch")
        applied = self._bool(e, "applied")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        accepted = self._accept(e, b, ce)
        e.applied = applied
        e.guard("applied means accepted", applied == accepted)
        return e

    def stop_replica(self, b: int) -> Effect:
        s = self.s
        e = Effect("StopReplica", f"broker:{b}", b)
        ce = self._int(e, "controller_epoch")
        applied = self._bool(e, "applied")
        delete = self._bool(e, "delete")
        included = self._bool(e, "included")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        accepted = self._accept(e, b, ce)
        e.applied = applied
        e.guard("applied means accepted", applied == accepted)
        act = and_(accepted, included, s.b("replica", b))
        gone = and_(act, delete)
        self._forget(e, b, when=act)
        e.updates[f"local_leader_epoch.{b}"] = ite(gone, NO_EPOCH, s.b("local_leader_epoch", b))
        e.updates[f"replica.{b}"] = ite(gone, FALSE, s.b("replica", b))
        e.updates[f"hw.{b}"] = ite(gone, 0, s.b("hw", b))
        e.updates[f"hw_checkpoint.{b}"] = ite(gone, 0, s.b("hw_checkpoint", b))
        self._write_log(e, b, ite(gone, 0, s.b("log_len", b)), ite(gone, 0, s.b("log_len", b)))
        return e

    # -- clients and replication -----------------------------------------------------------------------

    def produce(self, b: int) -> Effect:
        s = self.s
        e = Effect("Produce", "client", b, kind="client")
        acks_all = self._bool(e, "acks_all")
        ok = self._bool(e, "ok")
        counted = self.cfg.logs == "content" and not self.cfg.validation
        rec = s["g.next_record"] if counted else self._int(e, "record")
        length = s.b("log_len", b)
        size = count((s.local_isr(b, r) for r in self.ids), self.cfg.width)
        can = and_(s.b("alive", b), s.b("replica", b), s.b("role", b) == ROLE_LEADER,
                   s.b("local_leader_epoch", b) >= 0, implies(acks_all, size >= self.knobs.min_isr))
        if self.cfg.logs == "content":
            can = and_(can, length < self.cfg.capacity)
        e.guard("the write succeeds exactly when the broker leads (and min ISR holds for acks=all)", ok == can)
        if not self.cfg.validation:
            e.guard("the write succeeds", ok)
        new_len = ite(ok, length + 1, length)
        entries = None
        if self.cfg.logs == "content":
            entries = [
                (ite(and_(ok, length == i), s.b("local_leader_epoch", b), s.entry(b, i)[0]),
                 ite(and_(ok, length == i), rec, s.entry(b, i)[1]))
                for i in range(self.cfg.capacity)
            ]
            if counted:
                e.updates["g.next_record"] = ite(ok, s["g.next_record"] + 1, s["g.next_record"])
        self._write_log(e, b, new_len, length, entries)
        isr = {r: s.local_isr(b, r) for r in self.ids}
        fleo = {r: s.fleo(b, r) for r in self.ids}
        e.updates[f"hw.{b}"] = ite(ok, self._hw_after_advance(b, s.b("hw", b), length + 1, isr, fleo), s.b("hw", b))
        e.args = {"broker": b, "partition": None, "acks": ite(acks_all, -1, 1), "record": rec,
                  "error": ("", ok)}
        return e

    def fetch(self, leader: int, follower: int | None = None) -> Effect:
        """The leader handles a follower's fetch: it records the follower's position, adds it to the ISR
        once caught up (a compare-and-set write of the state node) and advances the HW."""
        s = self.s
        ids = self.ids
        b = leader
        e = Effect("Fetch", f"broker:{b}", b, kind="broker")
        if follower is None:
            f: Expr = self._int(e, "replica_id")
        else:
            f = self.num(follower)
            e.params["replica_id"] = f
        offset = self._int(e, "fetch_offset")
        current = self._int(e, "current_leader_epoch")
        cas = self._bool(e, "cas")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        e.guard("the fetch comes from another broker", and_(f != b, self.cfg.is_broker(f)))
        if self.cfg.atomic:
            assert follower is not None
            e.guard(f"broker {follower} follows broker {b} and fetches from its log end", and_(
                s.b("alive", follower), s.b("replica", follower), s.b("role", follower) == ROLE_FOLLOWER,
                s.b("leader_id", follower) == b, not_(s.b("truncating", follower)),
                offset == s.b("log_len", follower), current == s.b("local_leader_epoch", follower)))
        if not self.cfg.validation:
            e.guard("the compare-and-set succeeds exactly when the broker's version is the node's",
                    cas == and_(s["node"], s.b("known_version", b) == s["partition_version"]))
        else:
            e.guard("a compare-and-set needs the node", implies(cas, s["node"]))
        length = s.b("log_len", b)
        leading = and_(s.b("replica", b), s.b("role", b) == ROLE_LEADER, s.b("local_leader_epoch", b) >= 0)
        fenced = current != s.b("local_leader_epoch", b) if self.knobs.truncation == "kip320" else FALSE
        ok = and_(leading, not_(fenced), offset <= length, offset >= 0)
        known = and_(ok, s.assigned_has(f))
        in_sync = offset >= s.b("hw", b)
        if self.knobs.truncation == "kip320":
            in_sync = and_(in_sync, offset >= s.b("epoch_start_offset", b))
        outside = not_(or_all(and_(f == r, s.local_isr(b, r)) for r in ids))
        expand = and_(known, outside, in_sync, cas)
        new_isr = {r: or_(s.local_isr(b, r), and_(expand, f == r)) for r in ids}
        fleo = {r: ite(and_(known, f == r), offset, s.fleo(b, r)) for r in ids}
        for r in ids:
            if r != b:
                e.updates[f"follower_leo.{b}.{r}"] = fleo[r]
            e.updates[f"local_isr.{b}.{r}"] = new_isr[r]
        version = s["partition_version"] + 1
        self._write_node(e, self.num(b), s.b("local_leader_epoch", b), new_isr, s["partition_controller_epoch"],
                         version, when=expand)
        e.updates[f"known_version.{b}"] = ite(expand, version, s.b("known_version", b))
        e.updates[f"hw.{b}"] = ite(known, self._hw_after_advance(b, s.b("hw", b), length, new_isr, fleo), s.b("hw", b))
        e.args = {"replica_id": f, "fetch_offset": offset, "current_leader_epoch": current}
        return e

    def _leader_of(self, f: int) -> tuple[Expr, dict[str, Expr]]:
        """Atomic messaging: the state of the leader a follower knows (a symbolic broker)."""
        s = self.s
        leader = s.b("leader_id", f)
        picked = {name: s.pick(name, leader, default) for name, default in (
            ("alive", FALSE), ("replica", FALSE), ("role", ROLE_NONE), ("local_leader_epoch", NO_EPOCH),
            ("log_len", 0), ("hw", 0))}
        return leader, picked

    def _leader_entries(self, leader: Expr) -> list[tuple[Expr, Expr]]:
        return [(_pick_entry(self.s, leader, i, 0), _pick_entry(self.s, leader, i, 1))
                for i in range(self.cfg.capacity)]

    def fetch_response(self, f: int) -> Effect:
        """A follower appends what its leader returned and takes the leader's HW (capped by its log end);
        out of range, it truncates to the leader's log end."""
        s = self.s
        e = Effect("FetchResponse", f"broker:{f}", f, kind="broker")
        fetch_offset = self._int(e, "fetch_offset")
        epoch = self._int(e, "current_leader_epoch")
        error = self._int(e, "error")
        resp_hw = self._int(e, "high_watermark")
        leader_end = self._int(e, "leader_end_offset")
        new_len = self._int(e, "new_log_end")
        length = s.b("log_len", f)
        e.guard(f"broker {f} is alive", s.b("alive", f))
        entries = None
        if self.cfg.atomic:
            leader, ls = self._leader_of(f)
            e.guard(f"broker {f} follows a live leader", and_(
                s.b("replica", f), s.b("role", f) == ROLE_FOLLOWER, not_(s.b("truncating", f)),
                ls["alive"], ls["replica"], ls["role"] == ROLE_LEADER))
            if self.knobs.truncation == "kip320":
                e.guard("fenced fetching: the leader is in the follower's epoch",
                        ls["local_leader_epoch"] == s.b("local_leader_epoch", f))
            # A follower at its leader's log end still fetches: that is how the HW reaches it without new
            # records (and how a diverged follower gets a HW over records the leader does not have).
            e.guard("the response is the leader's current state", and_(
                fetch_offset == length, epoch == s.b("local_leader_epoch", f),
                error == ite(length > ls["log_len"], self.num(ERR_OUT_OF_RANGE), self.num(ERR_NONE)),
                resp_hw == ls["hw"], leader_end == ls["log_len"],
                implies(error == ERR_NONE, and_(new_len >= length, new_len <= ls["log_len"]))))
            if self.cfg.logs == "content":
                theirs = self._leader_entries(leader)
                entries = [
                    (ite(and_(error == ERR_NONE, i >= length, i < new_len), theirs[i][0], s.entry(f, i)[0]),
                     ite(and_(error == ERR_NONE, i >= length, i < new_len), theirs[i][1], s.entry(f, i)[1]))
                    for i in range(self.cfg.capacity)
                ]
        current = and_(s.b("replica", f), s.b("role", f) == ROLE_FOLLOWER,
                       s.b("local_leader_epoch", f) == epoch, not_(s.b("truncating", f)))
        out_of_range = and_(current, error == ERR_OUT_OF_RANGE, length > leader_end)
        append = and_(current, error == ERR_NONE, fetch_offset == length)
        e.guard("an append only grows the log", implies(append, new_len >= length))
        e.guard("the leader's log end and HW are offsets", and_(leader_end >= 0, resp_hw >= 0))
        final = ite(out_of_range, leader_end, ite(append, new_len, length))
        self._write_log(e, f, final, ite(out_of_range, leader_end, length), entries)
        e.updates[f"hw.{f}"] = ite(out_of_range, min2(s.b("hw", f), leader_end),
                                   ite(append, min2(resp_hw, new_len), s.b("hw", f)))
        e.args = {"fetch_offset": fetch_offset, "current_leader_epoch": epoch,
                  "error": ("OFFSET_OUT_OF_RANGE", error == ERR_OUT_OF_RANGE), "high_watermark": resp_hw,
                  "leader_end_offset": leader_end}
        return e

    def offsets_for_leader_epoch_response(self, f: int) -> Effect:
        """A follower that became follower truncates where its log and the leader's diverge (KIP-101,
        KIP-279, KIP-320), then fetches."""
        s = self.s
        e = Effect("OffsetsForLeaderEpochResponse", f"broker:{f}", f, kind="broker")
        epoch = self._int(e, "current_leader_epoch")
        error = self._int(e, "error")
        offset = self._int(e, "truncation_offset")
        length = s.b("log_len", f)
        hw = s.b("hw", f)
        e.guard(f"broker {f} is alive", s.b("alive", f))
        if self.cfg.atomic:
            leader, ls = self._leader_of(f)
            e.guard(f"broker {f} is truncating and its leader is live", and_(
                s.b("replica", f), s.b("role", f) == ROLE_FOLLOWER, s.b("truncating", f),
                ls["alive"], ls["replica"], ls["role"] == ROLE_LEADER,
                epoch == s.b("local_leader_epoch", f), error == ERR_NONE))
            if self.knobs.truncation == "kip320":
                e.guard("fenced: the leader is in the follower's epoch",
                        ls["local_leader_epoch"] == s.b("local_leader_epoch", f))
            if self.cfg.logs == "content":
                e.guard("the truncation offset of the design's rule",
                        offset == self._truncation_offset(f, leader, ls))
            else:
                e.guard("truncation keeps a prefix", and_(offset >= 0, offset <= length))
        active = and_(s.b("replica", f), s.b("role", f) == ROLE_FOLLOWER, s.b("local_leader_epoch", f) == epoch,
                      s.b("truncating", f), error == ERR_NONE)
        e.guard("a truncation offset is an offset", offset >= 0)
        new_len = ite(active, min2(length, offset), length)
        self._write_log(e, f, new_len, new_len)
        e.updates[f"hw.{f}"] = ite(active, min2(hw, new_len), hw)
        e.updates[f"truncating.{f}"] = ite(active, FALSE, s.b("truncating", f))
        e.args = {"current_leader_epoch": epoch, "truncation_offset": offset}
        return e

    def _truncation_offset(self, f: int, leader: Expr, ls: dict[str, Expr]) -> Expr:
        s = self.s
        cap = self.cfg.capacity
        own = [s.entry(f, i) for i in range(cap)]
        theirs = self._leader_entries(leader)
        own_len = s.b("log_len", f)
        their_len = ls["log_len"]
        their_epoch = ls["local_leader_epoch"]
        requested = _latest_epoch(own, own_len)
        if self.knobs.truncation == "kip101":
            end = _end_offset_for_epoch(theirs, their_len, requested, their_epoch)
            return ite(requested == NO_EPOCH, s.b("hw", f), min2(end, own_len))
        found = _largest_epoch_at_most(theirs, their_len, requested, their_epoch)
        end = _end_offset_for_epoch(theirs, their_len, found, their_epoch)
        own_end = _end_offset_for_epoch(own, own_len, found, requested + 1)
        return ite(found == NO_EPOCH, s.b("hw", f), min2(min2(end, own_end), own_len))

    def isr_shrink(self, b: int) -> Effect:
        """The leader drops lagging followers from the ISR (compare-and-set) and advances the HW."""
        s = self.s
        ids = self.ids
        e = Effect("IsrShrink", f"broker:{b}", b, kind="broker")
        removed = {r: self._bool(e, f"removed.{r}") for r in ids}
        cas = self._bool(e, "cas")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        e.guard("only other ISR members are removed",
                and_all(implies(removed[r], and_(s.local_isr(b, r), r != b)) for r in ids))
        acted = or_all(removed.values())
        e.guard("a shrink is a leader's", implies(acted, and_(
            s.b("replica", b), s.b("role", b) == ROLE_LEADER, s.b("local_leader_epoch", b) >= 0)))
        if not self.cfg.validation:
            e.guard("the compare-and-set succeeds", and_(acted, cas == and_(
                s["node"], s.b("known_version", b) == s["partition_version"]), cas))
        else:
            e.guard("a shrink is written with a compare-and-set of the node", implies(acted, and_(cas, s["node"])))
        new_isr = {r: and_(s.local_isr(b, r), not_(removed[r])) for r in ids}
        version = s["partition_version"] + 1
        self._write_node(e, self.num(b), s.b("local_leader_epoch", b), new_isr, s["partition_controller_epoch"],
                         version, when=acted)
        for r in ids:
            e.updates[f"local_isr.{b}.{r}"] = ite(acted, new_isr[r], s.local_isr(b, r))
        e.updates[f"known_version.{b}"] = ite(acted, version, s.b("known_version", b))
        fleo = {r: s.fleo(b, r) for r in ids}
        e.updates[f"hw.{b}"] = ite(acted, self._hw_after_advance(b, s.b("hw", b), s.b("log_len", b), new_isr, fleo),
                                   s.b("hw", b))
        e.args = {"partition": None, "removed": [(r, removed[r]) for r in ids]}
        return e

    def hw_checkpoint(self, b: int) -> Effect:
        s = self.s
        e = Effect("HwCheckpoint", f"broker:{b}", b, kind="broker")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        e.updates[f"hw_checkpoint.{b}"] = ite(s.b("replica", b), s.b("hw", b), s.b("hw_checkpoint", b))
        return e

    # -- validation-only steps ----------------------------------------------------------------------------

    def create_topic(self) -> Effect:
        s, t = self.s, self.t
        e = Effect("CreateTopic", "admin", None, kind="admin")
        created = self._bool(e, "created")
        self._free(e, "assigned")
        for r in self.ids:
            self._free(e, f"assignment.{r}")
        unchanged = and_(t["assigned"] == s["assigned"], *[t.assigned(r) == s.assigned(r) for r in self.ids])
        e.guard("a new partition gets an assignment; an existing one keeps its own", ite(
            created, and_(not_(s["assigned"]), not_(s["node"]), t["assigned"], or_all(t.assigned(r) for r in self.ids)),
            unchanged))
        return e

    def controlled_shutdown_response(self, b: int, action: str = "ControlledShutdownResponse") -> Effect:
        """The end of a controlled shutdown (the controller's response, or the broker giving up asking):
        the broker checkpoints its HWs and stops."""
        s = self.s
        e = Effect(action, f"broker:{b}", b, kind="broker")
        stopped = self._bool(e, "stopped")
        e.guard(f"broker {b} is alive", s.b("alive", b))
        crash = Effect("x", "env", b)
        self._crash_effects(crash, b, checkpoint_first=True)
        for leaf, value in crash.updates.items():
            e.updates[leaf] = ite(stopped, value, s[leaf])
        return e

    # -- the instances of each mode ---------------------------------------------------------------------

    def model_instances(self) -> list[Effect]:
        """Every action instance of the protocol model (model checking and induction)."""
        out: list[Effect] = []
        for b in self.ids:
            out += [self.broker_crash(b), self.broker_restart(b), self.session_expire(b), self.broker_reregister(b),
                    self.controller_elect(b), self.controller_resign(b), self.broker_change(b),
                    self.leader_and_isr(b), self.produce(b), self.fetch_response(b), self.isr_shrink(b),
                    self.hw_checkpoint(b)]
            if self.knobs.truncation != "hw":
                out.append(self.offsets_for_leader_epoch_response(b))
            out += [self.fetch(b, f) for f in self.ids if f != b]
        return out


def _pick_entry(s: State, broker: Expr, i: int, part: int) -> Expr:
    result: Expr = num(0, s.cfg.width)
    for b in s.cfg.ids:
        result = ite(broker == b, s.entry(b, i)[part], result)
    return result


def _latest_epoch(entries: list[tuple[Expr, Expr]], length: Expr) -> Expr:
    result: Expr = num_like(length, NO_EPOCH)
    for i, (ep, _) in enumerate(entries):
        result = ite(length == i + 1, ep, result)
    return result


def _end_offset_for_epoch(entries: list[tuple[Expr, Expr]], length: Expr, epoch: Expr, current: Expr) -> Expr:
    """`replica_log.end_offset_for_epoch`: the start of the first later epoch, else the log end."""
    later = [(num_like(length, i), and_(i < length, ep > epoch)) for i, (ep, _) in enumerate(entries)]
    scan = first(later, none=length)
    return ite(epoch >= current, length, scan)


def _largest_epoch_at_most(entries: list[tuple[Expr, Expr]], length: Expr, epoch: Expr, current: Expr) -> Expr:
    """`replica_log.largest_epoch_at_most` (KIP-279)."""
    best: Expr = num_like(length, NO_EPOCH)
    stopped: Expr = FALSE
    for i, (ep, _) in enumerate(entries):
        present = i < length
        take = and_(present, not_(stopped), ep <= epoch)
        best = ite(take, ep, best)
        stopped = or_(stopped, and_(present, ep > epoch))
    return ite(current <= epoch, current, best)


def relation(effect: Effect, s: State, t: State, with_frame: bool = True) -> Expr:
    """The formula effect(s, t): the guards, the updates, and every other leaf unchanged."""
    parts = [g for _, g in effect.guards]
    for name in s.names():
        new = effect.updates.get(name)
        if new is not None:
            parts.append(t[name] == new)
        elif with_frame:
            parts.append(t[name] == s[name])
    return and_all(parts)


def next_relation(effects: list[Effect], s: State, t: State, choice: Expr) -> Expr:
    """The disjunction of the effects, encoded with one ITE per leaf: `choice` names the instance taken."""
    parts: list[Expr] = [choice >= 0, choice < len(effects)]
    for i, effect in enumerate(effects):
        parts.append(implies(choice == i, and_all(g for _, g in effect.guards)))
    for name in s.names():
        value = s[name]
        for i, effect in enumerate(effects):
            new = effect.updates.get(name)
            if new is not None:
                value = ite(choice == i, new, value)
        parts.append(t[name] == value)
    return and_all(parts)


def fence_obligation(effect: Effect, s: State, t: State) -> Expr:
    """StaleControllerFenced for one step taken by `effect`: a broker does not apply a request from an
    older controller epoch than it has seen; a controller writes the store only in the current epoch."""
    if effect.kind == "request" and effect.broker is not None and effect.request_ce is not None:
        b = effect.broker
        stale = effect.request_ce < s.b("broker_controller_epoch", b)
        unchanged = [t[n] == s[n] for n in s.names() if _replica_leaf_of(n, b)]
        applied = effect.applied if effect.applied is not None else FALSE
        return implies(stale, and_(not_(applied), *unchanged))
    if effect.kind == "controller" and effect.broker is not None:
        c = effect.broker
        ids = s.cfg.ids
        changed = or_(*[t[n] != s[n] for n in ("leader", "leader_epoch", "assigned",
                                               *[f"isr.{r}" for r in ids], *[f"assignment.{r}" for r in ids])])
        return implies(changed, s.b("acting_controller_epoch", c) == s["controller_epoch"])
    return TRUE


OBSERVED_REPLICA_LEAVES: Final = ("role", "local_leader_epoch", "log_len", "hw", "epoch_start_offset")


def _replica_leaf_of(name: str, b: int) -> bool:
    parts = name.split(".")
    if parts[0] in OBSERVED_REPLICA_LEAVES and len(parts) == 2:
        return parts[1] == str(b)
    return parts[0] == "log" and len(parts) == 4 and parts[1] == str(b)
