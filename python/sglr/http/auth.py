"""Bearer-token auth (pure ASGI middleware, so streams are untouched).

With an API key set, every request needs `Authorization: Bearer <key>` (the only header SGLang
reads; the scheme's case does not matter), compared in constant time. Exempt: `PUBLIC_PATHS`,
and CORS preflight `OPTIONS` (as in SGLang). `sglr-router`'s fast path checks the same way
(`bearer_token_matches`).
"""

from __future__ import annotations

import hashlib
from hmac import compare_digest

from starlette.types import ASGIApp, Receive, Scope, Send

from sglr.http.dashboard import ASSET_PATHS
from sglr.http.errors import error_response

# The routes any client may call without the key: health probes (load balancers, sglr-router's
# checks) and the Prometheus scraper, as SGLang exempts them; the dashboard's page and script, which
# hold no data (its data route needs the key). Exact paths, not prefixes: a new route is never
# public by accident.
PUBLIC_PATHS = frozenset({"/health", "/health_generate", "/metrics"}) | ASSET_PATHS
UNAUTHORIZED_MESSAGE = "Unauthorized: a valid 'Authorization: Bearer <api key>' header is required"


class BearerAuthMiddleware:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._expected_digest = key_digest(api_key.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_public(scope["method"], scope["path"]) or self._is_authorized(scope):
            await self.app(scope, receive, send)
            return
        response = error_response(401, UNAUTHORIZED_MESSAGE)
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)

    def _is_authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                return bearer_token_matches(value, self._expected_digest)
        return bearer_token_matches(None, self._expected_digest)


def is_public(method: str, path: str) -> bool:
    return method == "OPTIONS" or path in PUBLIC_PATHS


def bearer_token_matches(authorization: bytes | None, expected_digest: bytes) -> bool:
    """Whether an `Authorization` header value carries the key whose `key_digest` is given."""
    token = b""
    if authorization is not None:
        scheme, _, rest = authorization.strip().partition(b" ")
        if scheme.lower() == b"bearer":
            token = rest.strip()
    # Fixed-length digests compared with compare_digest: the time taken reveals neither
    # where the token differs nor how long the key is.
    return compare_digest(key_digest(token), expected_digest)


def key_digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()
