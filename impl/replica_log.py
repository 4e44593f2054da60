"""A replica's log of (leader_epoch, record_id) entries, and the follower truncation rules of each era.

The leader-epoch cache is not stored: it is derived from the epochs the records carry, which is what
the cache holds for every epoch that produced at least one record.
"""

from __future__ import annotations

from kcm.impl.messages import UNDEFINED_EPOCH, Record


def end_offset_for_epoch(log: list[Record], epoch: int, current_epoch: int) -> int:
    """Offset just past the last record of `epoch` or earlier: the start of the first later epoch."""
    if epoch >= current_epoch:
        return len(log)
    for offset, (record_epoch, _) in enumerate(log):
        if record_epoch > epoch:
            return offset
    return len(log)


def largest_epoch_at_most(log: list[Record], epoch: int, current_epoch: int) -> int:
    """KIP-279: the largest epoch the leader knows that is not newer than the requested one."""
    if current_epoch <= epoch:
        return current_epoch
    best = UNDEFINED_EPOCH
    for record_epoch, _ in log:
        if record_epoch > epoch:
            break
        best = record_epoch
    return best


def latest_epoch(log: list[Record]) -> int:
    return log[-1][0] if log else UNDEFINED_EPOCH


def kip101_truncation_offset(log: list[Record], leader_end_offset: int) -> int:
    return min(leader_end_offset, len(log))


def kip279_truncation_offset(log: list[Record], leader_epoch: int, leader_end_offset: int) -> int:
    """Truncate to where the epoch both sides know ends on both sides."""
    own_end = end_offset_for_epoch(log, leader_epoch, latest_epoch(log) + 1)
    return min(leader_end_offset, own_end, len(log))
