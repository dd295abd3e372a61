"""Running an ASGI application for one request that `sglr.router.front` parsed: how
`sglr-router` serves its admin routes (Starlette, `sglr.router.admin`) from the same
port as its fast path, without a second HTTP server.

Enough of ASGI 3 for those routes: the body arrives whole, then `http.disconnect` when the
client goes; a response is written whole when it has a `content-length`, else chunked.
"""

from __future__ import annotations

from typing import Any

from sglr.router.front import ClientConnection, ClientRequest

ASGIApp = Any


async def run_asgi(app: ASGIApp, connection: ClientConnection, request: ClientRequest) -> None:
    method = request.method.decode("latin-1")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": request.http_version,
        "method": method,
        "scheme": "http",
        "path": _unquote(request.path),
        "raw_path": request.path,
        "query_string": request.query,
        "root_path": "",
        "headers": request.headers,
        "client": connection.client,
        "server": connection.server,
    }
    body_sent = False

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": request.body, "more_body": False}
        await connection.wait_lost()
        return {"type": "http.disconnect"}

    status = 0
    headers: list[tuple[bytes, bytes]] = []
    started = chunked = False

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers, started, chunked
        kind = message["type"]
        if kind == "http.response.start":
            status = message["status"]
            headers = [(bytes(name).lower(), bytes(value)) for name, value in message.get("headers", ())]
            return
        if kind != "http.response.body":
            return
        body = b"" if method == "HEAD" else message.get("body", b"")
        more = message.get("more_body", False)
        if not started:
            started = True
            if not more:
                connection.respond(status, [h for h in headers if h[0] != b"content-length"], body)
                return
            chunked = True
            connection.start_chunked(status, [h for h in headers if h[0] != b"content-length"], body)
        elif chunked:
            connection.write_chunk(body)
        if chunked and not more:
            connection.end_chunked()

    await app(scope, receive, send)


def _unquote(path: bytes) -> str:
    from urllib.parse import unquote_to_bytes

    return unquote_to_bytes(path).decode("utf-8", "replace") if b"%" in path else path.decode("latin-1")
