"""A stand-in worker that answers every HTTP request at once with a fixed JSON body (no model):
what the router's HTTP hop costs with no worker compute beside it on the CPUs.

    python benches/benchlib/instant_worker.py      # prints "instant-worker: answering requests on URL"
"""

from __future__ import annotations

import asyncio
import socket

_RESPONSE = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"text":""}'


class _InstantAnswer(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        # One answer per complete request (head, then content-length bytes of body).
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if len(rest) < length:
                return
            self.buffer = rest[length:]
            self.transport.write(_RESPONSE)  # type: ignore[attr-defined]


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    server = await asyncio.get_running_loop().create_server(_InstantAnswer, sock=sock)
    print(f"instant-worker: answering requests on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
