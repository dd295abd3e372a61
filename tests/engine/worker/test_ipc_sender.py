"""`Sender.send` never waits forever on a PUSH socket without a peer: it gives up when told to."""

from __future__ import annotations

from pathlib import Path

import zmq

from sglr.engine.worker.ipc import Receiver, Sender


def test_a_send_without_a_peer_gives_up_once_abandoned(tmp_path: Path) -> None:
    context = zmq.Context()
    try:
        sender = Sender(context, f"ipc://{tmp_path}/commands", bind=True)
        assert sender.send("now", block=False) is False  # no peer: nothing can take it
        checks = []

        def abandon() -> bool:
            checks.append(1)
            return len(checks) == 3

        assert sender.send("later", abandon=abandon) is False
        assert len(checks) == 3  # it waited, asking each time, and stopped when told
        receiver = Receiver(context, f"ipc://{tmp_path}/commands", bind=False)
        assert sender.send("delivered", abandon=lambda: False) is True
        assert receiver.receive(timeout_s=30) == "delivered"
        receiver.close()
        sender.close()
    finally:
        context.term()
