"""The implementation's side of eager-isr-join: the ISR expansion point only."""

from kcm.impl.design import Design


class EagerIsrJoin(Design):
    def in_sync_for_expansion(self, offset: int, leader_hw: int, epoch_start: int) -> bool:
        return True
