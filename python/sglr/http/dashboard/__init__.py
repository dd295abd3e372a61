"""The dashboard page's assets, shared by `sglr-server` and `sglr-router`: one HTML page and one
script (plain SVG and canvas drawing, no library and no build step, so the page works offline and
the package carries nothing to keep in step with a charting library's releases).

The assets hold no data: they are public (`auth.PUBLIC_PATHS`), and the script reads
`/dashboard/data`, which needs the API key when one is set (the page asks for it once and keeps it
in the tab's `sessionStorage`, or reads it from the URL fragment `#key=...`, which no server sees).
"""

from __future__ import annotations

from importlib.resources import files

from starlette.responses import Response

PAGE_PATH = "/dashboard"
SCRIPT_PATH = "/dashboard/dashboard.js"
DATA_PATH = "/dashboard/data"
ASSET_PATHS = frozenset({PAGE_PATH, SCRIPT_PATH})

_MEDIA_TYPES = {
    "dashboard.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
}


def asset_response(name: str) -> Response:
    """One of the assets (`dashboard.html`, `dashboard.js`), read from the package."""
    body = files(__package__).joinpath(name).read_bytes()
    # no-cache: a browser revalidates, so a page never runs a script from an older release.
    return Response(body, media_type=_MEDIA_TYPES[name], headers={"Cache-Control": "no-cache"})
