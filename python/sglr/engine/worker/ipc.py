"""Control messages between processes: pickled Python objects over pyzmq PUSH/PULL sockets.

pyzmq rather than `multiprocessing` connections: sends never block the scheduler on a slow
reader (messages queue in the background I/O thread), one socket carries every request's
outputs, the same code runs over `ipc://` locally and `tcp://` between hosts, and a reader
can wait on several sockets (and a timeout) at once. Tensors never travel here.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from typing import Any

import zmq

# How long a send waiting for room sleeps between its `abandon()` checks.
_ABANDON_POLL_MS = 100


class Sender:
    """A PUSH socket; `send` may be called from several threads."""

    def __init__(self, context: zmq.Context[Any], endpoint: str, bind: bool) -> None:
        self._socket = _open(context, zmq.PUSH, endpoint, bind)
        self._lock = threading.Lock()

    def send(self, message: Any, block: bool = True, abandon: Callable[[], bool] | None = None) -> bool:
        """Queues `message`; gives up (False) when the socket cannot take it now and `block` is
        False, or, while waiting, once `abandon()` is true. A PUSH socket whose only peer has
        gone waits forever, so a caller whose peer can die passes `abandon`."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            while True:
                try:
                    self._socket.send(data, copy=False, flags=zmq.NOBLOCK if abandon or not block else 0)
                    return True
                except zmq.Again:
                    if not block or (abandon is not None and abandon()):
                        return False
                # Room (or a peer) may come back: wait for it a while, then ask again.
                self._socket.poll(_ABANDON_POLL_MS, zmq.POLLOUT)

    def close(self, linger_s: float = 0.0) -> None:
        """Closes the socket, first waiting up to `linger_s` for queued messages to leave."""
        with self._lock:
            self._socket.close(linger=int(linger_s * 1000))


class Receiver:
    """A PULL socket read by one thread; `receive` returns None when `timeout_s` passes first."""

    def __init__(self, context: zmq.Context[Any], endpoint: str, bind: bool) -> None:
        self._socket = _open(context, zmq.PULL, endpoint, bind)

    def receive(self, timeout_s: float | None = None) -> Any:
        if timeout_s is not None and not self._socket.poll(int(timeout_s * 1000)):
            return None
        return pickle.loads(self._socket.recv(copy=False).buffer)

    def close(self) -> None:
        self._socket.close(linger=0)


def _open(context: zmq.Context[Any], kind: int, endpoint: str, bind: bool) -> zmq.Socket[Any]:
    socket = context.socket(kind)
    socket.setsockopt(zmq.LINGER, 0)
    if bind:
        socket.bind(endpoint)
    else:
        socket.connect(endpoint)
    return socket
