"""A ZooKeeper store whose sessions can be paused the way a broker's process stalls (a long garbage-collection
pause): its client sends nothing, not even a heartbeat, until ZooKeeper's session tracker expires the session
on its own clock. Only the server decides the expiry, as it does for a stalled broker; `expire_session`, by
contrast, has a client close the session.

kazoo has no call to withhold heartbeats: for the pause, the paused client's connection handler gets a
`_send_ping` of its own that sends nothing (kazoo 2.11 kazoo/protocol/connection.py `_connect_attempt` pings
through it when the connection has been idle for a third of the session timeout). Nothing else of kazoo is
touched, and the handler is restored when the pause ends.
"""

from __future__ import annotations

from kcm.impl.zookeeper.store import ConnectionLostError, ZooKeeperStore


class PausableStore(ZooKeeperStore):
    def pause(self, session: int) -> None:
        """Session `session`'s client goes silent until ZooKeeper has expired the session; returns once the
        client has heard so (its ephemerals are then reported as changed, as for any session that expires on
        its own). Its owner learns of it when it next looks: `session_alive` is False."""
        record = self._live(session, "")
        self._flush([record])  # events fired while it lived stay queued
        connection = record.client._connection
        connection._send_ping = _silent
        try:
            # ZooKeeper expires a silent session within its timeout, and its tick, after the last heartbeat.
            if not record.expired.wait(self.retry_bound):
                raise ConnectionLostError("", f"session {session} did not expire within {self.retry_bound:.0f} s")
        finally:
            del connection._send_ping


def _silent(_connect_timeout: float) -> None:
    """No heartbeat."""
