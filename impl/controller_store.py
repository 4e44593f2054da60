"""The controller's writes to the coordination store. With `controller_epoch_fencing` every write is one
multi-op that first checks the `/controller_epoch` node's version: a deposed controller's write fails
whole, and the controller learns that it has been deposed."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from kcm.impl import zk_paths
from kcm.impl.controller_context import ControllerContext, LeaderIsr
from kcm.impl.design import Design
from kcm.impl.store import (
    BadVersionError,
    CheckVersion,
    CoordinationStore,
    Create,
    Delete,
    MultiError,
    NodeExistsError,
    NoNodeError,
    Op,
    SetData,
    Stat,
)


class ControllerMovedError(Exception):
    """A write of this controller was refused because another controller has been elected since."""


class ControllerStore:
    def __init__(self, store: CoordinationStore, design: Design) -> None:
        self.store = store
        self.design = design
        self.session = 0
        self.journal: list[list[object]] = []

    def write(self, ctx: ControllerContext, ops: Sequence[Op]) -> list[Stat | None]:
        fenced = self.design.fences_controller_writes()
        checked: list[Op] = [CheckVersion(zk_paths.CONTROLLER_EPOCH, ctx.epoch_version), *ops] if fenced else list(ops)
        try:
            results = self.store.multi(self.session, checked)
        except MultiError as err:
            if fenced and err.index == 0:
                raise ControllerMovedError(str(err)) from err
            raise err.cause from err
        for op in ops:
            self.journal.append([type(op).__name__, op.path, getattr(op, "data", None)])
        return results[1:] if fenced else results

    def read_leader_isr(self, partition: str) -> LeaderIsr | None:
        try:
            data, stat = self.store.get(zk_paths.partition_state_path(partition))
        except NoNodeError:
            return None
        return leader_isr_of(data, stat.version)

    def update_leader_isr(self, ctx: ControllerContext, partition: str, new: LeaderIsr) -> LeaderIsr | None:
        """Compare-and-set on the partition node; None when a broker changed the ISR meanwhile."""
        data = zk_paths.leader_and_isr_data(new.leader, new.leader_epoch, new.isr, new.controller_epoch)
        try:
            (stat,) = self.write(ctx, [SetData(zk_paths.partition_state_path(partition), data, new.version)])
        except BadVersionError:
            return None
        assert stat is not None
        return LeaderIsr(new.leader, new.leader_epoch, new.isr, new.controller_epoch, stat.version)

    def create_leader_isr(self, ctx: ControllerContext, partition: str, new: LeaderIsr) -> LeaderIsr | None:
        path = zk_paths.partition_state_path(partition)
        parent = path.rpartition("/")[0]
        if self.store.exists(parent) is None:
            self.store.create(self.session, parent, None, make_parents=True)
        data = zk_paths.leader_and_isr_data(new.leader, new.leader_epoch, new.isr, new.controller_epoch)
        try:
            self.write(ctx, [Create(path, data)])
        except NodeExistsError:
            return None
        return LeaderIsr(new.leader, new.leader_epoch, new.isr, new.controller_epoch, 0)

    def set_topic_assignment(self, ctx: ControllerContext, topic: str) -> None:
        assignment = {
            zk_paths.split_partition(p)[1]: ctx.assignment[p] for p in ctx.topics.get(topic, [])
        }
        self.write(ctx, [SetData(zk_paths.topic_path(topic), zk_paths.topic_data(assignment))])

    def delete_tree(self, ctx: ControllerContext, paths: Sequence[str]) -> None:
        """Deletes each path with everything below it, in one fenced multi-op."""
        doomed: list[str] = []
        for path in paths:
            doomed.extend(self._subtree(path))
        if doomed:
            self.write(ctx, [Delete(p) for p in doomed])

    def _subtree(self, path: str) -> list[str]:
        try:
            children = self.store.children(path)
        except NoNodeError:
            return []
        below = [p for child in children for p in self._subtree(f"{path}/{child}")]
        return [*below, path]

    def delete_quietly(self, ctx: ControllerContext, path: str) -> None:
        with contextlib.suppress(NoNodeError):
            self.write(ctx, [Delete(path)])


def leader_isr_of(data: Any, version: int) -> LeaderIsr:
    return LeaderIsr(data["leader"], data["leader_epoch"], tuple(data["isr"]), data["controller_epoch"], version)
