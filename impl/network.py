"""The simulated network: messages in flight with a delivery delay on the logical clock.

Each (sender, receiver) pair is one connection and delivers in order, as Kafka's TCP connections do;
messages on different connections interleave freely (so requests of two controllers, or of a controller
and a broker, reorder), and faults may duplicate any message and drop replication traffic (see messages.LOSSY).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .messages import LOSSY, Envelope


@dataclass(slots=True)
class InFlight:
    envelope: Envelope
    ready_at: int


class Network:
    def __init__(self, rng: random.Random, max_delay: int) -> None:
        self.rng = rng
        self.max_delay = max_delay
        self.in_flight: list[InFlight] = []

    def send(self, envelopes: list[Envelope], now: int) -> None:
        for envelope in envelopes:
            delay = self.rng.randint(0, self.max_delay) if self.max_delay else 0
            self.in_flight.append(InFlight(envelope, now + delay))

    def ready(self, now: int) -> list[int]:
        """Indexes of the deliverable messages: the oldest of each connection, once its delay is over."""
        heads: dict[tuple[int, int], int] = {}
        for i, m in enumerate(self.in_flight):
            heads.setdefault((m.envelope.src, m.envelope.dst), i)
        return [i for i in heads.values() if self.in_flight[i].ready_at <= now]

    def lossy(self) -> list[int]:
        """Indexes of the messages a fault may drop."""
        return [i for i, m in enumerate(self.in_flight) if isinstance(m.envelope.message, LOSSY)]

    def take(self, index: int) -> Envelope:
        return self.in_flight.pop(index).envelope

    def take_oldest(self) -> Envelope | None:
        """FIFO delivery, ignoring delays: what a scripted scenario uses to run to quiescence."""
        if not self.in_flight:
            return None
        return self.in_flight.pop(0).envelope

    def duplicate(self, index: int, now: int) -> Envelope:
        original = self.in_flight[index]
        self.in_flight.append(InFlight(original.envelope, now))
        return original.envelope

    def disconnect(self, broker: int) -> int:
        """A crashed broker's connections close: everything to or from it is lost."""
        before = len(self.in_flight)
        self.in_flight = [m for m in self.in_flight if broker not in (m.envelope.src, m.envelope.dst)]
        return before - len(self.in_flight)
