"""The simulated network: messages in flight with a delivery delay on the logical clock.

Each (sender, receiver) pair is one connection and delivers in order, as Kafka's TCP connections do;
messages on different connections interleave freely (so requests of two controllers, or of a controller
and a broker, reorder), and faults may duplicate any message and drop replication traffic (see messages.LOSSY).
A duplicate travels right behind its original: Kafka resends a request only over a new connection and before
anything queued after it (the controller's send thread has one request out per broker, a follower one fetch
per leader), so a copy never overtakes what was sent later.

Messages held for a broker that is down (`hold`) wait outside the network until it is back (`release`):
before KIP-380 the controller's send thread retries its requests until they get through (2.1.0
ControllerChannelManager.scala RequestSendThread), and only the controller forgets them (`forget`, when it
finds the broker dead: removeBroker).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from kcm.impl.messages import LOSSY, Envelope

Connection = tuple[int, int]


# Compared by identity: a duplicate equals its original field for field, yet is a message of its own.
@dataclass(slots=True, eq=False)
class InFlight:
    envelope: Envelope
    ready_at: int


class Network:
    def __init__(self, rng: random.Random, max_delay: int) -> None:
        self.rng = rng
        self.max_delay = max_delay
        self.in_flight: list[InFlight] = []
        # The same messages by connection, in send order: the deliverable ones are the connections'
        # heads, found without scanning everything in flight at every step.
        self._connections: dict[Connection, deque[InFlight]] = {}
        self.held: dict[int, list[Envelope]] = {}

    def send(self, envelopes: list[Envelope], now: int) -> None:
        # `randrange(n + 1)` draws what `randint(0, n)` draws, one Python call sooner: one draw per message.
        bound = self.max_delay + 1
        for envelope in envelopes:
            delay = self.rng.randrange(bound) if self.max_delay else 0
            self._append(InFlight(envelope, now + delay))

    def ready(self, now: int) -> list[int]:
        """Indexes of the deliverable messages: the oldest of each connection, once its delay is over."""
        in_flight = self.in_flight
        heads = [in_flight.index(queue[0]) for queue in self._connections.values() if queue[0].ready_at <= now]
        heads.sort()
        return heads

    def lossy(self) -> list[int]:
        """Indexes of the messages a fault may drop."""
        return [i for i, m in enumerate(self.in_flight) if isinstance(m.envelope.message, LOSSY)]

    def take(self, index: int) -> Envelope:
        return self._remove(self.in_flight.pop(index))

    def take_oldest(self) -> Envelope | None:
        """FIFO delivery, ignoring delays: what a scripted scenario uses to run to quiescence."""
        if not self.in_flight:
            return None
        return self._remove(self.in_flight.pop(0))

    def duplicate(self, index: int, now: int) -> Envelope:
        original = self.in_flight[index]
        copy = InFlight(original.envelope, now)
        self.in_flight.insert(index + 1, copy)
        queue = self._connections[(original.envelope.src, original.envelope.dst)]
        queue.insert(queue.index(original) + 1, copy)
        return original.envelope

    def disconnect(self, broker: int) -> list[Envelope]:
        """A crashed broker's connections close: everything to or from it is lost, and what it held for
        others. Returns what was lost in flight, in send order."""
        lost = [m.envelope for m in self.in_flight if broker in (m.envelope.src, m.envelope.dst)]
        self.in_flight = [m for m in self.in_flight if broker not in (m.envelope.src, m.envelope.dst)]
        for connection in [c for c in self._connections if broker in c]:
            del self._connections[connection]
        for dst in list(self.held):
            self.forget(broker, dst)
        return lost

    def hold(self, envelopes: list[Envelope]) -> None:
        for envelope in envelopes:
            self.held.setdefault(envelope.dst, []).append(envelope)

    def release(self, broker: int, now: int) -> None:
        """The broker is back: what was held for it is sent, in order."""
        self.send(self.held.pop(broker, []), now)

    def forget(self, src: int, dst: int) -> None:
        """`src` drops what it held for `dst`."""
        kept = [e for e in self.held.get(dst, []) if e.src != src]
        if kept:
            self.held[dst] = kept
        else:
            self.held.pop(dst, None)

    def _append(self, message: InFlight) -> None:
        self.in_flight.append(message)
        connection = (message.envelope.src, message.envelope.dst)
        queue = self._connections.get(connection)
        if queue is None:
            self._connections[connection] = deque((message,))
        else:
            queue.append(message)

    def _remove(self, message: InFlight) -> Envelope:
        """Keeps a connection only while it has messages, so that every queue has a head."""
        connection = (message.envelope.src, message.envelope.dst)
        queue = self._connections[connection]
        if queue[0] is message:
            queue.popleft()
        else:
            queue.remove(message)
        if not queue:
            del self._connections[connection]
        return message.envelope
