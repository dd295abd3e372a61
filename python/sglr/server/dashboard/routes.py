"""The dashboard's routes on `sglr-server`:

GET /dashboard                the page (public: it holds no data)
GET /dashboard/dashboard.js   its script (public)
GET /dashboard/data           the JSON snapshot the page polls (`snapshot.py`; needs the key)
    ?max_nodes=64&max_depth=8 how much of the prefix tree to summarize (bounded)
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from sglr.engine.kv.tree_summary import TreeSummaryLimits
from sglr.errors import InvalidRequestError
from sglr.http.dashboard import asset_response
from sglr.http.jsonout import JSONOut
from sglr.server.dashboard.snapshot import build_snapshot
from sglr.server.state import ServerState

_LIMIT_FIELDS = ("max_nodes", "max_depth")


async def dashboard_page(state: ServerState, request: Request) -> Response:
    return asset_response("dashboard.html")


async def dashboard_script(state: ServerState, request: Request) -> Response:
    return asset_response("dashboard.js")


async def dashboard_data(state: ServerState, request: Request) -> Response:
    limits = tree_limits(dict(request.query_params))
    snapshot = await asyncio.to_thread(build_snapshot, state, state.dashboard, limits)
    return JSONOut(snapshot)


def tree_limits(params: dict[str, str]) -> TreeSummaryLimits:
    """The query's tree limits (defaults for those it leaves out); a 400 naming a bad one."""
    for name in params:
        if name not in _LIMIT_FIELDS:
            raise InvalidRequestError(f"unknown query parameter {name!r} of /dashboard/data", param=name)
    values = {}
    for name in _LIMIT_FIELDS:
        if name in params:
            raw = params[name]
            if not raw.isdigit() or len(raw) > 6:
                raise InvalidRequestError(
                    f"{name} must be a non-negative integer, got {raw[:20]!r}", param=name
                )
            values[name] = int(raw)
    return TreeSummaryLimits(**values)
