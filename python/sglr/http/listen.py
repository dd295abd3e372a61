"""What `sglr-server` and `sglr-router` share around the port they serve.

Both take `--host` and `--port` alike (`add_listen_arguments`). The port is bound first
(`listen`: a busy port fails at once, before a model loads or a worker is asked anything);
once requests are accepted the program announces where
(`<prog>: <what> on http://host:port`, the line scripts and tests wait for); the event loop is
uvloop's where it is installed (`run_event_loop`). Both command lines take the same log levels
and log in the same format (`configure_logging`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
_BACKLOG = 2048


@dataclass(frozen=True)
class Listener:
    """A bound, listening socket (inheritable: uvicorn's workers may take it over) and its URL."""

    prog: str
    sock: socket.socket
    url: str

    def announce(self, what: str) -> None:
        """`<prog>: <what> on <url>`, flushed: the program accepts requests from now on."""
        print(f"{self.prog}: {what} on {self.url}", flush=True)

    def close(self) -> None:
        self.sock.close()


def add_listen_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    add("--port", type=int, default=30000, help="port to listen on; 0 picks a free one (default: 30000)")


def listen(host: str, port: int, prog: str) -> Listener:
    """Binds `host:port` (port 0: a free one); exits naming `prog` when the port cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"{prog}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(_BACKLOG)
    sock.set_inheritable(True)
    bound_host, bound_port = sock.getsockname()[:2]
    shown_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    return Listener(prog, sock, f"http://{shown_host}:{bound_port}")


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    """Runs `main` on uvloop where it is installed (its C transports cost a streamed token
    noticeably less CPU than asyncio's selector loop), else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)
