"""A loopback TCP relay in front of a server whose connections can be cut (`Relay`): how the store machine
makes every ZooKeeper client lose its connection while the sessions live on. The clients reconnect through
the relay at once, as they would to a server that dropped them, and their sessions survive as long as they
are back within the session timeout."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from types import TracebackType

_CHUNK = 65536
_POLL = 0.01


class Relay:
    """Forwards each connection made to `port` to `target` (host, port), byte for byte, on one thread. A
    context manager: leaving it stops the thread and closes every socket."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._wake_read, self._wake_write = socket.socketpair()
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._cut_done = threading.Event()
        self._cut_wanted = False
        self._stopping = False
        self._refusing = False
        self.accepted = 0  # connections accepted since the relay started
        self._thread = threading.Thread(target=self._serve, name=f"relay-{self.port}", daemon=True)
        self._thread.start()

    @property
    def open_connections(self) -> int:
        return len(self._peers) // 2

    def cut(self, timeout: float = 5.0, hold: bool = False) -> int:
        """Closes every connection now open (both ends); returns how many there were.  With `hold`, the
        relay also refuses new connections until `release`, so a client stays cut off while others write."""
        before = self.open_connections
        self._refusing = hold
        self._cut_done.clear()
        self._cut_wanted = True
        self._wake_write.send(b"\0")
        if not self._cut_done.wait(timeout):
            raise TimeoutError(f"the relay on port {self.port} did not cut its connections within {timeout} s")
        return before

    def release(self) -> None:
        """Lets clients reconnect again after `cut(hold=True)`."""
        self._refusing = False

    def wait_for_connections(self, count: int, timeout: float) -> None:
        """Returns once `count` connections are open again (the clients reconnected), or raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while self.open_connections < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.open_connections} of {count} clients reconnected within {timeout} s")
            time.sleep(_POLL)

    def close(self) -> None:
        self._stopping = True
        self._wake_write.send(b"\0")
        self._thread.join()
        for sock in (self._listener, self._wake_read, self._wake_write):
            sock.close()
        self._selector.close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _serve(self) -> None:
        while not self._stopping:
            for key, _ in self._selector.select():
                if key.fileobj is self._listener:
                    self._accept()
                elif key.fileobj is self._wake_read:
                    self._wake_read.recv(_CHUNK)
                    if self._cut_wanted:
                        self._cut_wanted = False
                        self._drop_all()
                        self._cut_done.set()
                elif isinstance(key.fileobj, socket.socket) and key.fileobj in self._peers:
                    self._forward(key.fileobj)
        self._drop_all()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        if self._refusing:
            client.close()  # held off: the client sees a dropped connection and retries
            return
        try:
            server = socket.create_connection(self._target, timeout=5.0)
        except OSError:
            client.close()  # the server is down: the client sees a refused connection, as it would directly
            return
        self.accepted += 1
        for sock in (client, server):
            sock.setblocking(True)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._peers[client], self._peers[server] = server, client
        self._selector.register(client, selectors.EVENT_READ)
        self._selector.register(server, selectors.EVENT_READ)

    def _forward(self, source: socket.socket) -> None:
        # A ZooKeeper connection carries small packets: one recv is ready, and the peer's buffer takes it.
        try:
            data = source.recv(_CHUNK)
            if data:
                self._peers[source].sendall(data)
                return
        except OSError:
            pass
        self._drop(source)

    def _drop(self, sock: socket.socket) -> None:
        peer = self._peers.pop(sock)
        del self._peers[peer]
        for end in (sock, peer):
            self._selector.unregister(end)
            end.close()

    def _drop_all(self) -> None:
        while self._peers:
            self._drop(next(iter(self._peers)))
