"""The refinement mapping: from the implementation's state to the model's variables (spec.vocabulary).

Each step, only what the step touched is read again (store paths written, replicas and controller
partitions marked dirty), and only the leaves that differ from what was last reported are emitted, so a
trace event carries exactly the change of its step.
"""

from __future__ import annotations

from typing import Any

from kcm.impl import zk_paths
from kcm.impl.controller import Controller
from kcm.impl.messages import Record
from kcm.impl.replica_manager import ReplicaManager
from kcm.impl.states import PartitionState, ReplicaState
from kcm.impl.store import CoordinationStore, NoNodeError
from kcm.spec.vocabulary import NO_LEADER

Leaf = Any
PARTITION_NODE_VARS = ("leader", "leader_epoch", "isr", "partition_controller_epoch", "partition_version")
REPLICA_VARS = ("role", "local_leader_epoch", "local_isr", "log", "hw", "hw_checkpoint", "epoch_start_offset")


class Abstraction:
    def __init__(self) -> None:
        self.seen: dict[tuple[str, ...], Any] = {}
        self.roles: dict[int, tuple[bool, int, int]] = {}
        self.replicas: dict[tuple[str, str], tuple[Leaf, ...]] = {}
        self.replica_seen: dict[tuple[str, str], dict[int, ReplicaState]] = {}
        self.partition_seen: dict[tuple[str, str], PartitionState] = {}
        # Per replica, the log's records when its leaf was last built, and that leaf.
        self.logs: dict[tuple[str, str], tuple[list[Record], list[list[int]]]] = {}

    def delta(
        self,
        store: CoordinationStore,
        changed_paths: set[str],
        managers: dict[int, ReplicaManager],
        controllers: dict[int, Controller],
        known_partitions: set[str],
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if changed_paths:
            self._store_delta(store, changed_paths, known_partitions, out)
        for broker, manager in managers.items():
            controller = controllers[broker]
            ctx = controller.ctx
            # `Controller.epoch` read off the context here: this runs for every broker at every step.
            epoch = 0 if ctx is None else ctx.epoch
            roles = (manager.alive, manager.controller_epoch, epoch)
            # `seen` holds the leaves of `roles` as last reported: while they stay, there is nothing to emit.
            moved = self.roles.get(broker) != roles
            if not (moved or manager.dirty or controller.resigned_partitions or (ctx is not None and ctx.dirty)):
                continue
            key = str(broker)
            if moved:
                self.roles[broker] = roles
                self._emit(out, ("alive", key), manager.alive)
                self._emit(out, ("broker_controller_epoch", key), manager.controller_epoch)
            if manager.dirty:
                self._broker_delta(key, manager, out)
            if moved:
                self._emit(out, ("acting_controller_epoch", key), epoch)
            self._controller_delta(key, controller, out)
        return out

    def snapshot(
        self,
        store: CoordinationStore,
        managers: dict[int, ReplicaManager],
        controllers: dict[int, Controller],
        known_partitions: set[str],
    ) -> dict[str, Any]:
        """The full state, as the first event of a trace carries it."""
        for broker in managers:
            managers[broker].dirty.update(managers[broker].replicas)
        paths = {zk_paths.CONTROLLER, zk_paths.CONTROLLER_EPOCH}
        paths.update(zk_paths.partition_state_path(p) for p in known_partitions)
        return self.delta(store, paths, managers, controllers, known_partitions)

    # -- emit helpers ------------------------------------------------------------------------------

    def _emit(self, out: dict[str, Any], keys: tuple[str, ...], value: Leaf) -> None:
        """Report one leaf if it changed. `keys` is (variable, key1, key2, ...)."""
        seen = self.seen
        if keys in seen:
            if seen[keys] == value:
                return
            if value is None:
                del seen[keys]
            else:
                seen[keys] = value
        elif value is None:
            return
        else:
            seen[keys] = value
        target = out
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        target[keys[-1]] = value

    # -- the store ---------------------------------------------------------------------------------------

    def _store_delta(
        self, store: CoordinationStore, paths: set[str], known: set[str], out: dict[str, Any]
    ) -> None:
        if zk_paths.CONTROLLER in paths:
            holder = _read(store, zk_paths.CONTROLLER)
            self._emit(out, ("controller",), NO_LEADER if holder is None else int(holder["brokerid"]))
        if zk_paths.CONTROLLER_EPOCH in paths:
            self._emit(out, ("controller_epoch",), int(_read(store, zk_paths.CONTROLLER_EPOCH) or 0))
        for path in sorted(paths):
            if not path.startswith(zk_paths.TOPICS + "/"):
                continue
            parts = path[len(zk_paths.TOPICS) + 1 :].split("/")
            if len(parts) == 1:
                self._topic_delta(store, parts[0], known, out)
            elif len(parts) == 4 and parts[3] == "state":
                self._partition_node_delta(store, zk_paths.partition_name(parts[0], int(parts[2])), out)

    def _topic_delta(self, store: CoordinationStore, topic: str, known: set[str], out: dict[str, Any]) -> None:
        data = _read(store, zk_paths.topic_path(topic))
        assignment = zk_paths.topic_assignment(data) if data is not None else {}
        names = {zk_paths.partition_name(topic, i): list(r) for i, r in assignment.items()}
        prefix = topic + "-"
        gone = [p for p in known if p.startswith(prefix) and zk_paths.split_partition(p)[0] == topic]
        for partition in sorted(set(gone) | set(names)):
            self._emit(out, ("assignment", partition), names.get(partition))
            if partition not in names:
                self._partition_node_delta(store, partition, out)

    def _partition_node_delta(self, store: CoordinationStore, partition: str, out: dict[str, Any]) -> None:
        try:
            data, stat = store.get(zk_paths.partition_state_path(partition))
        except NoNodeError:
            values: tuple[Leaf, ...] = (None,) * len(PARTITION_NODE_VARS)
        else:
            node: Any = data
            values = (node["leader"], node["leader_epoch"], list(node["isr"]), node["controller_epoch"], stat.version)
        for variable, value in zip(PARTITION_NODE_VARS, values, strict=True):
            self._emit(out, (variable, partition), value)

    # -- brokers and controllers ---------------------------------------------------------------------------

    def _broker_delta(self, key: str, manager: ReplicaManager, out: dict[str, Any]) -> None:
        """A replica's leaves are reported straight from the tuple of its last values, which stands in for
        `seen`: a leaf is emitted when its raw value moved (the log: when its content did)."""
        for partition in sorted(manager.dirty):
            replica = manager.replicas.get(partition)
            if replica is None:
                self.logs.pop((key, partition), None)
                gone = self.replicas.pop((key, partition), None)
                if gone is not None:
                    for variable, last in zip(REPLICA_VARS, gone, strict=True):
                        if last is not None:
                            out.setdefault(variable, {}).setdefault(key, {})[partition] = None
                continue
            role = replica.role
            current = (
                role,
                replica.leader_epoch,
                replica.isr if role is not None else None,
                replica.log_version,
                replica.hw,
                replica.hw_checkpoint,
                replica.epoch_start_offset if role == "leader" else None,
            )
            previous = self.replicas.get((key, partition))
            if previous == current:
                continue
            self.replicas[(key, partition)] = current
            for index, variable in enumerate(REPLICA_VARS):
                value: Leaf = current[index]
                if previous is None:
                    if value is None:
                        continue
                elif previous[index] == value:
                    continue
                if variable == "log":
                    built = self.logs.get((key, partition))
                    value = self._log_leaf((key, partition), replica.log)
                    if built is not None and built[1] == value:
                        continue
                elif variable == "local_isr" and value is not None:
                    value = list(value)
                out.setdefault(variable, {}).setdefault(key, {})[partition] = value
        manager.dirty.clear()

    def _log_leaf(self, replica: tuple[str, str], log: list[Record]) -> list[list[int]]:
        """The log as a trace leaf: a new list, whose entries for the records that stayed since the last
        leaf are that leaf's own. Leaves are never mutated (see `trace.apply_delta`), and a log mostly
        grows at its end, so a step costs the records it added, not the whole log."""
        cached = self.logs.get(replica)
        if cached is None:
            leaf = list(map(list, log))
        else:
            records, last = cached
            kept = min(len(log), len(records))
            if log[:kept] == records[:kept]:
                leaf = last[:kept]
                leaf.extend(map(list, log[kept:]))
            else:
                leaf = list(map(list, log))
        self.logs[replica] = (log[:], leaf)
        return leaf

    def _controller_delta(self, key: str, controller: Controller, out: dict[str, Any]) -> None:
        if controller.resigned_partitions:
            for partition in sorted(controller.resigned_partitions):
                self._partition_state_delta(key, partition, None, out)
                self._replica_states_delta(key, partition, {}, out)
            controller.resigned_partitions = set()
        ctx = controller.ctx
        if ctx is None or not ctx.dirty:
            return
        for partition in sorted(ctx.dirty):
            self._partition_state_delta(key, partition, ctx.partition_states.get(partition), out)
            self._replica_states_delta(key, partition, ctx.replica_states.get(partition, {}), out)
        ctx.dirty.clear()

    def _partition_state_delta(
        self, key: str, partition: str, state: PartitionState | None, out: dict[str, Any]
    ) -> None:
        """Like `_emit`, against `partition_seen`, the states last reported, compared as they are: a
        failover marks every partition dirty, and most keep their state."""
        if self.partition_seen.get((key, partition)) is state:
            return
        if state is None:
            del self.partition_seen[(key, partition)]
        else:
            self.partition_seen[(key, partition)] = state
        # `_value_` rather than `value`: the enum property costs a Python call per read on 3.11.
        out.setdefault("partition_state", {}).setdefault(key, {})[partition] = None if state is None else state._value_

    def _replica_states_delta(
        self, key: str, partition: str, states: dict[int, ReplicaState], out: dict[str, Any]
    ) -> None:
        """`replica_seen` holds a copy of the states last reported, compared as they are: no leaf is built
        for a partition whose replica states did not move, which is most of those a step marks dirty."""
        before = self.replica_seen.get((key, partition), {})
        if before == states:
            return
        for replica in sorted(before.keys() | states.keys()):
            state = states.get(replica)
            if before.get(replica) is not state:
                leaves = out.setdefault("replica_state", {}).setdefault(key, {}).setdefault(partition, {})
                leaves[str(replica)] = None if state is None else state._value_
        if states:
            self.replica_seen[(key, partition)] = dict(states)
        else:
            self.replica_seen.pop((key, partition), None)


def _read(store: CoordinationStore, path: str) -> Any:
    try:
        data, _ = store.get(path)
    except NoNodeError:
        return None
    return data
