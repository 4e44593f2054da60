"""The eleven invariants of docs/invariants.md as DataFrame operations over ordered events.

The single-process checker (conformance/check/invariants.py) keeps a state and walks the events; here the
state is never materialised. Each event's delta is exploded into leaves (variable, keys, value), and the
value a variable holds at an event is the last leaf written before it: a window over the variable's keys
ordered by `seq` (an "as-of" lookup). Step invariants compare a leaf with the previous one, history
invariants are running aggregates (first leader of an epoch, running maximum of the exposed HW, the
longest committed prefix). Everything is a column expression; no Python runs per row.

Two segment counters per run stand for the checker's resets: `fseg` (a `full` snapshot empties the
state) and `hseg` (an `Init` or a snapshot starts a new history).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kcm.conformance.check.invariants import (
    CONTEXT_LOAD_ACTIONS,
    CONTROLLER_REQUESTS,
    REPLICA_VARS,
    STORE_PARTITION_VARS,
)
from kcm.spec.states import VALID_PARTITION_TRANSITIONS, VALID_REPLICA_TRANSITIONS
from kcm.spec.vocabulary import HW_ACROSS_LEADERS, HW_PER_LEADER, VARIABLES

_LONG: Final = T.LongType()
_IDS: Final = T.ArrayType(_LONG)
_LOG: Final = T.ArrayType(T.ArrayType(_LONG))


def _map(value: T.DataType, depth: int) -> T.DataType:
    for _ in range(depth):
        value = T.MapType(T.StringType(), value)
    return value


# The type of each variable's values; the map keys in front of them come from its depth (VARIABLES).
_VALUE_TYPES: Final[dict[str, T.DataType]] = {
    "assignment": _IDS, "isr": _IDS, "local_isr": _IDS, "log": _LOG, "alive": T.BooleanType(),
    "partition_state": T.StringType(), "replica_state": T.StringType(), "role": T.StringType(),
}
STATE_SCHEMA: Final = T.StructType(
    [T.StructField(name, _map(_VALUE_TYPES.get(name, _LONG), depth)) for name, depth in VARIABLES.items()]
)
ARGS_SCHEMA: Final = T.StructType(
    [
        T.StructField("controller_epoch", _LONG),
        T.StructField("applied", T.BooleanType()),
        # Entries mix strings, nulls and (for replicas) ids; read as strings they keep their text.
        T.StructField("transitions", T.ArrayType(T.ArrayType(T.StringType()))),
        T.StructField("knobs", T.StructType([T.StructField("truncation", T.StringType())])),
    ]
)
VIOLATION_COLUMNS: Final = ("run", "seq", "invariant", "message")

_PARTITION_PAIRS: Final = sorted(f"{src}>{dst}" for src, dst in VALID_PARTITION_TRANSITIONS)
_REPLICA_PAIRS: Final = sorted(f"{src}>{dst}" for src, dst in VALID_REPLICA_TRANSITIONS)
_UNBOUNDED: Final = Window.unboundedPreceding


def parse_events(events: DataFrame) -> DataFrame:
    """Typed deltas and args, the segment counters and the actor's id, one row per event."""
    run_order = Window.partitionBy("run").orderBy("seq").rowsBetween(_UNBOUNDED, Window.currentRow)
    resets = F.col("full") | (F.col("action") == "Init")
    parsed = events.select(
        "run", "seq", "actor", "action", "full",
        F.from_json("state", STATE_SCHEMA).alias("st"),
        F.from_json("args", ARGS_SCHEMA).alias("a"),
        F.substring_index("actor", ":", -1).alias("actor_id"),
        F.substring_index("actor", ":", 1).alias("actor_kind"),
    )
    return (
        parsed.withColumn("fseg", F.sum(F.col("full").cast("int")).over(run_order))
        .withColumn("hseg", F.sum(resets.cast("int")).over(run_order))
        .withColumn("truncation", F.coalesce(
            F.first(F.col("a.knobs.truncation"), ignorenulls=True).over(
                Window.partitionBy("run", "hseg").orderBy("seq").rowsBetween(_UNBOUNDED, Window.currentRow)),
            F.lit("kip320")))
    )


# -- leaves and as-of lookups ----------------------------------------------------------------------------------


def _depth1(ev: DataFrame, var: str, key: str) -> DataFrame:
    return ev.select("run", "seq", "fseg", "hseg", F.explode(F.col(f"st.{var}")).alias(key, "val"))


def _depth2(ev: DataFrame, var: str) -> DataFrame:
    outer = ev.select("run", "seq", "fseg", "hseg", F.explode(F.col(f"st.{var}")).alias("b", "m"))
    return outer.select("run", "seq", "fseg", "hseg", "b", F.explode("m").alias("p", "val"))


def _wrapped(frame: DataFrame, name: str) -> DataFrame:
    """The leaf's value inside a struct: a null struct means "not written here", a struct holding null
    means "deleted here"."""
    return frame.withColumn(name, F.struct(F.col("val").alias("x"))).drop("val")


def _filled(leaves: dict[str, DataFrame], keys: list[str]) -> DataFrame:
    """One row per event that wrote any of the variables under `keys`, with each variable's value after it."""
    frames = [_wrapped(frame, name) for name, frame in leaves.items()]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    group = ["run", "fseg", "hseg", *keys, "seq"]
    rows = union.groupBy(*group).agg(*(F.first(name, ignorenulls=True).alias(f"d_{name}") for name in leaves))
    upto = Window.partitionBy("run", "fseg", *keys).orderBy("seq").rowsBetween(_UNBOUNDED, Window.currentRow)
    for name in leaves:
        rows = rows.withColumn(name, F.last(f"d_{name}", ignorenulls=True).over(upto).getField("x"))
    return rows


def asof(probes: DataFrame, values: DataFrame, keys: list[str], columns: list[str], same_seq: bool) -> DataFrame:
    """Each probe row with `columns` as `values` held them at its seq: after the probe's own event when
    `same_seq`, before it otherwise. Keys absent so far give nulls."""
    packed = values.select(*keys, "seq", F.struct(*columns).alias("_v"), F.lit(0 if same_seq else 1).alias("_t"))
    probe_tag = 1 if same_seq else 0
    marked = probes.withColumn("_t", F.lit(probe_tag)).withColumn("_v", F.lit(None).cast(packed.schema["_v"].dataType))
    union = marked.unionByName(packed, allowMissingColumns=True)
    order = Window.partitionBy(*keys).orderBy("seq", "_t").rowsBetween(_UNBOUNDED, Window.currentRow)
    found = union.withColumn("_f", F.last("_v", ignorenulls=True).over(order)).filter(F.col("_t") == probe_tag)
    return found.select(*probes.columns, *[F.col("_f").getField(c).alias(c) for c in columns])


def _violations(frame: DataFrame, invariant: str | Column, message: Column) -> DataFrame:
    name = invariant if isinstance(invariant, Column) else F.lit(invariant)
    return frame.select("run", "seq", name.alias("invariant"), message.alias("message"))


def _fmt(template: str, *cols: Column) -> Column:
    return F.format_string(template, *[c.cast("string") for c in cols])


# -- the checks -------------------------------------------------------------------------------------------------


class _Tables:
    """The filled tables the invariants share, built once per check."""

    def __init__(self, ev: DataFrame) -> None:
        self.ev = ev
        store = {var: _depth1(ev, var, "p") for var in STORE_PARTITION_VARS}
        sp = _filled(store, ["p"])
        deleted = (F.col("d_assignment").isNotNull() & F.col("d_assignment.x").isNull()).cast("int")
        gen = Window.partitionBy("run", "hseg", "p").orderBy("seq").rowsBetween(_UNBOUNDED, Window.currentRow)
        self.store = sp.withColumn("pgen", F.sum(deleted).over(gen))
        self.replica = _filled({var: _depth2(ev, var) for var in REPLICA_VARS}, ["b", "p"]).localCheckpoint()
        self.store = self.store.localCheckpoint()


def check_invariants(events: DataFrame) -> DataFrame:
    """Violations (run, seq, invariant, message) of every invariant, one row per violation found."""
    # Checkpoints cut the lineage: the optimizer then sees a dozen small plans, not one plan of hundreds of nodes
    # (planning it took longer than running it).
    ev = parse_events(events).localCheckpoint()
    tables = _Tables(ev)
    parts = [
        _store_state(tables),
        _one_leader(tables),
        _hw_per_leader(tables),
        _epochs(ev),
        _fencing(ev),
        *_transitions(ev),
        *_data(tables),
    ]
    return union_all(parts)


def _store_state(t: _Tables) -> DataFrame:
    sp = t.store
    outside = F.array_sort(F.array_distinct(F.array_except("isr", "assignment")))
    isr = sp.filter(F.col("isr").isNotNull() & F.col("assignment").isNotNull() & (F.size(outside) > 0))
    isr_v = _violations(isr, "IsrSubsetOfReplicas",
                        _fmt("%s: ISR %s has %s outside the assignment %s", F.col("p"), F.col("isr"), outside,
                             F.col("assignment")))
    lii = sp.filter(F.col("leader").isNotNull() & F.col("isr").isNotNull() & (F.col("leader") != 0)
                    & ~F.array_contains("isr", F.col("leader")))
    lii_v = _violations(lii, "LeaderInIsr", _fmt("%s: leader %s is not in the ISR %s", F.col("p"), F.col("leader"),
                                                 F.col("isr")))
    return isr_v.unionByName(lii_v)


def _claims(t: _Tables) -> DataFrame:
    store = t.store.filter(F.col("leader").isNotNull() & F.col("leader_epoch").isNotNull() & (F.col("leader") != 0))
    store = store.select("run", "hseg", "pgen", "p", "seq", F.lit(0).alias("o"), F.lit("").alias("ob"),
                         F.col("leader_epoch").alias("epoch"), F.col("leader").alias("broker"))
    # A broker claims its epoch whether or not its HW is observed, as the single-process checker does.
    leading = t.replica.filter((F.col("role") == "leader") & (F.col("local_leader_epoch") >= 0))
    brokers = _with_pgen(t, leading).select("run", "hseg", "pgen", "p", "seq", F.lit(1).alias("o"),
                                            F.col("b").alias("ob"), F.col("local_leader_epoch").alias("epoch"),
                                            F.col("b").cast("long").alias("broker"))
    return store.unionByName(brokers)


def _leading(rp: DataFrame) -> DataFrame:
    return rp.filter((F.col("role") == "leader") & F.col("local_leader_epoch").isNotNull() & F.col("hw").isNotNull())


def _with_pgen(t: _Tables, frame: DataFrame) -> DataFrame:
    """The partition's generation (deletions so far, this event's included) on each replica row."""
    gens = t.store.select("run", "hseg", "p", "seq", "pgen")
    return asof(frame, gens, ["run", "hseg", "p"], ["pgen"], same_seq=True).fillna({"pgen": 0})


def _one_leader(t: _Tables) -> DataFrame:
    claims = _claims(t)
    order = Window.partitionBy("run", "hseg", "pgen", "p", "epoch").orderBy("seq", "o", "ob").rowsBetween(
        _UNBOUNDED, Window.currentRow)
    firsts = claims.withColumn("first", F.first("broker").over(order))
    bad = firsts.filter(F.col("first") != F.col("broker"))
    return _violations(bad, "OneLeaderPerEpoch", _fmt("%s: epoch %s has two leaders, broker %s and broker %s",
                                                      F.col("p"), F.col("epoch"), F.col("first"), F.col("broker")))


def _hw_per_leader(t: _Tables) -> DataFrame:
    rp = t.replica
    leading = (F.col("role") == "leader") & F.col("local_leader_epoch").isNotNull() & F.col("hw").isNotNull()
    order = Window.partitionBy("run", "hseg", "b", "p").orderBy("seq")
    rows = rp.withColumn("lead", leading).withColumn("prev_lead", F.lag("lead").over(order)) \
        .withColumn("prev_epoch", F.lag("local_leader_epoch").over(order)) \
        .withColumn("prev_hw", F.lag("hw").over(order))
    bad = rows.filter(F.col("lead") & F.col("prev_lead") & (F.col("prev_epoch") == F.col("local_leader_epoch"))
                      & (F.col("hw") < F.col("prev_hw")))
    return _violations(bad, HW_PER_LEADER, _fmt("%s: leader %s moved its HW back from %s to %s within epoch %s",
                                                F.col("p"), F.col("b"), F.col("prev_hw"), F.col("hw"),
                                                F.col("local_leader_epoch")))


def _went_back(frame: DataFrame, keys: list[str], default: Column | None) -> DataFrame:
    """Rows whose new value is below the one before it (within the state segment)."""
    order = Window.partitionBy("run", "fseg", *keys).orderBy("seq")
    prev = F.lag("val").over(order)
    rows = frame.withColumn("old", prev if default is None else F.coalesce(prev, default))
    return rows.filter(F.col("old").isNotNull() & F.col("val").isNotNull() & (F.col("val") < F.col("old")))


def _epochs(ev: DataFrame) -> DataFrame:
    controller = ev.filter(F.col("st.controller_epoch").isNotNull()).select(
        "run", "seq", "fseg", F.col("st.controller_epoch").alias("val"))
    ce = _violations(_went_back(controller, [], F.lit(0)), "ControllerEpochMonotonic",
                     _fmt("controller epoch went back from %s to %s", F.col("old"), F.col("val")))
    seen = ev.select("run", "seq", "fseg", "st.alive", F.explode("st.broker_controller_epoch").alias("b", "val"))
    bce_rows = _went_back(seen, ["b"], None).filter(~F.coalesce(F.map_contains_key("alive", F.col("b")), F.lit(False)))
    bce = _violations(bce_rows, "ControllerEpochMonotonic",
                      _fmt("broker %s went back from controller epoch %s to %s", F.col("b"), F.col("old"),
                           F.col("val")))
    le_rows = _went_back(_depth1(ev, "leader_epoch", "p"), ["p"], None)
    le = _violations(le_rows, "LeaderEpochMonotonic",
                     _fmt("%s: leader epoch went back from %s to %s", F.col("p"), F.col("old"), F.col("val")))
    lle_rows = _went_back(_depth2(ev, "local_leader_epoch"), ["b", "p"], None)
    lle = _violations(lle_rows, "LeaderEpochMonotonic",
                      _fmt("%s: broker %s went back from leader epoch %s to %s", F.col("p"), F.col("b"), F.col("old"),
                           F.col("val")))
    return ce.unionByName(bce).unionByName(le).unionByName(lle)


def _fencing(ev: DataFrame) -> DataFrame:
    seen_values = ev.select("run", "fseg", F.explode("st.broker_controller_epoch").alias("b", "seen"), "seq")
    requests = ev.filter(F.col("action").isin(*CONTROLLER_REQUESTS) & F.col("a.controller_epoch").isNotNull())
    changed = F.lit(False)
    for var in REPLICA_VARS:
        changed = changed | F.coalesce(F.map_contains_key(F.col(f"st.{var}"), F.col("actor_id")), F.lit(False))
    probes = (requests.select("run", "fseg", "seq", "action", F.col("actor_id").alias("b"),
                                     F.col("a.controller_epoch").alias("epoch"),
                                     (F.coalesce(F.col("a.applied"), F.lit(False)) | changed).alias("took")))
    looked = asof(probes, seen_values, ["run", "fseg", "b"], ["seen"], same_seq=False)
    stale = looked.filter(F.col("took") & (F.col("epoch") < F.col("seen")))
    first = _violations(stale, "StaleControllerFenced",
                        _fmt("broker %s applied %s from controller epoch %s after seeing epoch %s", F.col("b"),
                             F.col("action"), F.col("epoch"), F.col("seen")))
    touched = F.array_sort(F.array_distinct(F.flatten(F.array(*[
        F.coalesce(F.map_keys(F.col(f"st.{var}")), F.array().cast("array<string>")) for var in STORE_PARTITION_VARS]))))
    writes = ev.filter(F.col("actor_kind") == "controller").withColumn("touched", touched) \
        .filter(F.size("touched") > 0).select("run", "fseg", "seq", F.col("actor_id").alias("b"), "touched")
    acting_values = ev.select("run", "fseg", "seq", F.explode("st.acting_controller_epoch").alias("b", "acting"))
    with_acting = asof(writes, acting_values, ["run", "fseg", "b"], ["acting"], same_seq=False)
    epoch_values = ev.filter(F.col("st.controller_epoch").isNotNull()).select(
        "run", "fseg", "seq", F.col("st.controller_epoch").alias("current"))
    both = asof(with_acting, epoch_values, ["run", "fseg"], ["current"], same_seq=False).fillna(
        {"acting": 0, "current": 0})
    deposed = both.filter(F.col("acting") < F.col("current"))
    second = _violations(deposed, "StaleControllerFenced",
                         _fmt("deposed controller %s (epoch %s) wrote %s while controller epoch %s is current",
                              F.col("b"), F.col("acting"), F.array_join("touched", ", "), F.col("current")))
    return first.unionByName(second)


# -- state machines -------------------------------------------------------------------------------------------


def _transitions(ev: DataFrame) -> list[DataFrame]:
    machines = ev.filter(F.size("a.transitions") > 0)
    entries = machines.select("run", "fseg", "seq", "action", F.col("actor_id").alias("b"),
                              F.posexplode("a.transitions").alias("pos", "e"))
    partition_kind = F.col("e")[0] == "partition"
    entries = entries.select(
        "run", "fseg", "seq", "action", "b", "pos", F.col("e")[0].alias("kind"), F.col("e")[1].alias("p"),
        F.when(partition_kind, F.lit("")).otherwise(F.col("e")[2]).alias("r"),
        F.when(partition_kind, F.col("e")[2]).otherwise(F.col("e")[3]).alias("src"),
        F.when(partition_kind, F.col("e")[3]).otherwise(F.col("e")[4]).alias("dst"),
    )
    values = _machine_values(ev)
    keys = ["run", "fseg", "kind", "b", "p", "r"]
    before = asof(entries, values, keys, ["ms"], same_seq=False).withColumnRenamed("ms", "before")
    chain = Window.partitionBy("run", "seq", "kind", "p", "r").orderBy("pos")
    absent = F.when(F.col("kind") == "partition", F.lit("NonExistentPartition")).otherwise(F.lit("NonExistentReplica"))
    # A context load starts afresh: what the controller held before does not count.
    held = F.when(~F.col("action").isin(*CONTEXT_LOAD_ACTIONS), F.col("before"))
    rows = before.withColumn("current", F.coalesce(F.lag("dst").over(chain), held, absent)) \
        .withColumn("last", F.lead("pos").over(chain).isNull())
    invariant = F.when(F.col("kind") == "partition", F.lit("ValidPartitionTransitions")).otherwise(
        F.lit("ValidReplicaTransitions"))
    what = F.when(F.col("kind") == "partition", F.col("p")).otherwise(F.concat_ws(" replica ", "p", "r"))
    loaded = rows.filter(F.col("src").isNull() & ~F.col("action").isin(*CONTEXT_LOAD_ACTIONS))
    moved = rows.filter(F.col("src").isNotNull())
    wrong_from = moved.filter(F.col("src") != F.col("current"))
    pair = F.concat_ws(">", "src", "dst")
    allowed = F.when(F.col("kind") == "partition", F.array_contains(F.array(*map(F.lit, _PARTITION_PAIRS)), pair)) \
        .otherwise(F.array_contains(F.array(*map(F.lit, _REPLICA_PAIRS)), pair))
    invalid = moved.filter(~allowed)
    after = asof(rows.filter("last"), values, keys, ["ms"], same_seq=True)
    ends = after.withColumn("final", F.coalesce("ms", absent)).filter(F.col("final") != F.col("dst"))
    return [
        _violations(loaded, invariant,
                    _fmt("%s: state loaded as %s outside a controller failover", what, F.col("dst"))),
        _violations(wrong_from, invariant, _fmt("%s: transition from %s but the state was %s", what, F.col("src"),
                                                F.col("current"))),
        _violations(invalid, invariant, _fmt("%s: invalid transition %s -> %s", what, F.col("src"), F.col("dst"))),
        _violations(ends, invariant, _fmt("%s: transitions end in %s but the state is %s", what, F.col("dst"),
                                          F.col("final"))),
        _unexplained(ev, entries),
    ]


def _machine_values(ev: DataFrame) -> DataFrame:
    """Every partition- and replica-state leaf written, as (kind, b, p, r, ms)."""
    partitions = _depth2(ev, "partition_state").select(
        "run", "fseg", "seq", F.lit("partition").alias("kind"), "b", "p", F.lit("").alias("r"),
        F.col("val").alias("ms"))
    outer = _depth2(ev, "replica_state")
    replicas = outer.select("run", "fseg", "seq", "b", "p", F.explode("val").alias("r", "ms")).select(
        "run", "fseg", "seq", F.lit("replica").alias("kind"), "b", "p", "r", "ms")
    return partitions.unionByName(replicas)


def _unexplained(ev: DataFrame, entries: DataFrame) -> DataFrame:
    machines = F.col("st.partition_state").isNotNull() | F.col("st.replica_state").isNotNull()
    changed = _machine_values(ev.filter(machines))
    own = changed.join(ev.select("run", "seq", F.col("actor_id").alias("b"), "action"), ["run", "seq", "b"])
    # A context load replaces the controller's states wholesale: one it does not load again just goes.
    own = own.filter(~(F.col("action").isin(*CONTEXT_LOAD_ACTIONS) & F.col("ms").isNull()))
    explained = entries.select("run", "seq", "kind", "p", "r").distinct()
    lone = own.join(explained, ["run", "seq", "kind", "p", "r"], "left_anti")
    acting = ev.select("run", "fseg", "seq", F.explode("st.acting_controller_epoch").alias("b", "acting"))
    still = asof(lone, acting, ["run", "fseg", "b"], ["acting"], same_seq=True).filter(
        F.coalesce(F.col("acting"), F.lit(0)) != 0)
    invariant = F.when(F.col("kind") == "partition", F.lit("ValidPartitionTransitions")).otherwise(
        F.lit("ValidReplicaTransitions"))
    what = F.when(F.col("kind") == "partition", F.col("p")).otherwise(F.concat_ws(" replica ", "p", "r"))
    return _violations(still, invariant, _fmt("%s: state changed without a transition", what))


# -- logs and the HW across leaders ------------------------------------------------------------------------------


def _data(t: _Tables) -> list[DataFrame]:
    """NoCommittedDataLoss, ReplicaLogsAgree and HighWatermarkMonotonic/AcrossLeaders: each event that
    touched a partition sees every broker's replica of it as it stands after the event."""
    touch = t.store.select("run", "fseg", "hseg", "p", "seq").unionByName(
        t.replica.select("run", "fseg", "hseg", "p", "seq")).distinct()
    truncation = t.ev.select("run", "seq", "truncation")
    store_cols = ["leader", "leader_epoch", "isr", "pgen"]
    at = asof(touch, t.store.select("run", "fseg", "p", "seq", *store_cols), ["run", "fseg", "p"],
              store_cols, same_seq=True).fillna({"pgen": 0}).join(truncation, ["run", "seq"])
    holders = t.replica.select("run", "p", "b").distinct()
    replica_cols = ["role", "local_leader_epoch", "hw", "epoch_start_offset", "log"]
    cross = at.join(holders, ["run", "p"])
    per_broker = asof(cross, t.replica.select("run", "fseg", "b", "p", "seq", *replica_cols), ["run", "fseg", "b", "p"],
                      replica_cols, same_seq=True).localCheckpoint()
    return [_logs_agree(per_broker), _exposed_hw(per_broker), *_committed(t, per_broker)]


def _logs_agree(per_broker: DataFrame) -> DataFrame:
    logs = per_broker.filter(F.col("log").isNotNull()).select("run", "seq", "p", "b", "log", "hw")
    left = logs.select("run", "seq", "p", F.col("b").alias("b1"), F.col("log").alias("log1"), F.col("hw").alias("hw1"))
    right = logs.select("run", "seq", "p", F.col("b").alias("b2"), F.col("log").alias("log2"), F.col("hw").alias("hw2"))
    pairs = left.join(right, ["run", "seq", "p"]).filter(F.col("b1") < F.col("b2"))
    k = F.least(F.coalesce("hw1", F.lit(0)), F.coalesce("hw2", F.lit(0)), F.size("log1"), F.size("log2"))
    pairs = pairs.withColumn("s1", F.slice("log1", 1, k)).withColumn("s2", F.slice("log2", 1, k))
    bad = pairs.filter(F.col("s1") != F.col("s2")).withColumn("at", _first_difference("s1", "s2"))
    return _violations(bad, "ReplicaLogsAgree",
                       _fmt("%s: brokers %s and %s disagree at offset %s below both HWs (%s vs %s)", F.col("p"),
                            F.col("b1"), F.col("b2"), F.col("at"), F.element_at("s1", F.col("at") + 1),
                            F.element_at("s2", F.col("at") + 1)))


def _first_difference(a: str, b: str) -> Column:
    """The first offset at which two arrays differ (the shorter one's length when one is a prefix)."""
    common = F.least(F.size(a), F.size(b))
    differs = F.filter(F.sequence(F.lit(1), common),
                       lambda i: F.element_at(F.col(a), i) != F.element_at(F.col(b), i))
    first = F.when(common > 0, F.element_at(differs, 1) - 1)
    return F.coalesce(first, common)


def _current(per_broker: DataFrame) -> DataFrame:
    """The row of the partition's current leader: the store's leader, leading in the store's epoch."""
    return per_broker.filter((F.col("leader") != 0) & (F.col("b") == F.col("leader").cast("string"))
                             & (F.col("role") == "leader") & (F.col("local_leader_epoch") == F.col("leader_epoch")))


def _exposed_hw(per_broker: DataFrame) -> DataFrame:
    current = _current(per_broker).filter(F.col("hw").isNotNull())
    withheld = (F.col("truncation") == "kip320") & (F.col("hw") < F.coalesce("epoch_start_offset", F.lit(0)))
    exposed = current.filter(~withheld)
    order = Window.partitionBy("run", "hseg", "pgen", "p").orderBy("seq").rowsBetween(_UNBOUNDED, -1)
    rows = exposed.withColumn("highest", F.coalesce(F.max("hw").over(order), F.lit(0)))
    bad = rows.filter(F.col("hw") < F.col("highest"))
    return _violations(bad, HW_ACROSS_LEADERS,
                       _fmt("%s: HW exposed by leader %s (epoch %s) is %s, below the %s exposed before", F.col("p"),
                            F.col("b"), F.col("leader_epoch"), F.col("hw"), F.col("highest")))


def _committed(t: _Tables, per_broker: DataFrame) -> list[DataFrame]:
    leaders = _with_pgen(t, _leading(t.replica))
    prefix = F.slice(F.coalesce("log", F.array().cast(_LOG)), 1, F.least(F.col("hw"), F.size(F.coalesce(
        "log", F.array().cast(_LOG)))).cast("int"))
    commits = leaders.select("run", "hseg", "pgen", "p", "seq", "b", prefix.alias("prefix"))
    order = Window.partitionBy("run", "hseg", "pgen", "p").orderBy("seq", "b")
    longest = F.coalesce(F.max(F.size("prefix")).over(order.rowsBetween(_UNBOUNDED, -1)), F.lit(0))
    extensions = commits.withColumn("longest", longest).filter(F.size("prefix") > F.col("longest"))
    ext_order = Window.partitionBy("run", "hseg", "pgen", "p").orderBy("seq", "b")
    extensions = extensions.withColumn("before", F.coalesce(F.lag("prefix").over(ext_order), F.array().cast(_LOG)))
    contradicts = extensions.filter(F.slice("prefix", 1, F.size("before")) != F.col("before")) \
        .withColumn("at", _first_difference("prefix", "before"))
    first = _violations(contradicts, "NoCommittedDataLoss",
                        _fmt("%s: leader %s commits a log that differs from the committed records at offset %s",
                             F.col("p"), F.col("b"), F.col("at")))
    committed = extensions.select("run", "hseg", "pgen", "p", "seq", F.col("prefix").alias("committed"))
    current = _current(per_broker).select("run", "seq", "p", F.col("b").alias("cl"))
    holders = per_broker.join(current, ["run", "seq", "p"], "left").filter(
        F.col("log").isNotNull() & (F.coalesce(F.array_contains(F.col("isr"), F.col("b").cast("long")), F.lit(False))
                                    | (F.col("b") == F.coalesce(F.col("cl"), F.lit("")))))
    looked = asof(holders, committed, ["run", "hseg", "pgen", "p"], ["committed"], same_seq=True)
    lost = looked.filter(F.col("committed").isNotNull() & (F.size("committed") > 0)) \
        .filter(F.slice("log", 1, F.size("committed")) != F.col("committed")) \
        .withColumn("at", _first_difference("log", "committed"))
    second = _violations(lost, "NoCommittedDataLoss",
                         _fmt("%s: committed record %s at offset %s is %s the log of broker %s", F.col("p"),
                              F.element_at("committed", F.col("at") + 1), F.col("at"),
                              F.when(F.col("at") >= F.size("log"), F.lit("missing from"))
                              .otherwise(F.lit("replaced in")),
                              F.col("b")))
    return [first, second]


def union_all(frames: Iterable[DataFrame]) -> DataFrame:
    items = list(frames)
    result = items[0]
    for frame in items[1:]:
        result = result.unionByName(frame)
    return result
