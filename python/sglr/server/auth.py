"""Bearer-token auth (pure ASGI middleware, so streams are untouched).

With an API key set, every request needs `Authorization: Bearer <key>`, compared in constant
time. Exempt: `/health*` and `/metrics` (probes and scrapers), and CORS preflight `OPTIONS`.
"""

from __future__ import annotations

import hashlib
import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from sglr.server.errors import error_response

_EXEMPT_PREFIXES = ("/health", "/metrics")


class BearerAuthMiddleware:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._expected_digest = _digest(api_key.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._is_exempt(scope) or self._is_authorized(scope):
            await self.app(scope, receive, send)
            return
        response = error_response(
            401, "Unauthorized: a valid 'Authorization: Bearer <api key>' header is required"
        )
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)

    @staticmethod
    def _is_exempt(scope: Scope) -> bool:
        return scope.get("method") == "OPTIONS" or scope["path"].startswith(_EXEMPT_PREFIXES)

    def _is_authorized(self, scope: Scope) -> bool:
        token = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, rest = value.strip().partition(b" ")
                if scheme.lower() == b"bearer":
                    token = rest.strip()
                break
        # Fixed-length digests compared with compare_digest: the time taken reveals neither
        # where the token differs nor how long the key is.
        return hmac.compare_digest(_digest(token), self._expected_digest)


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()
