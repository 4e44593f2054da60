"""The implementation's side of strict-isr-join: the ISR expansion point only."""

from kcm.impl.design import Design


class StrictIsrJoin(Design):
    def in_sync_for_expansion(self, offset: int, leader_hw: int, epoch_start: int) -> bool:
        return offset > leader_hw and offset >= epoch_start
