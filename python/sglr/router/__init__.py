"""Routing requests over replicas, and `sglr-router`, the program that does it over HTTP.

Below HTTP, with no I/O: the routing policy (`policy.py`: `Router`, which replica serves a
request; the in-process data-parallel engine, `sglr.data_parallel`, uses it too), routing keys of API
bodies (`keys.py`) and the worker pool behind `sglr-router` (`workers.py`). The program
above them: its command line (`launch.py`), one port (`server.py`) whose generation routes take
the fast path (`front.py` -> `proxy.py` -> `upstream.py`) while the rest go to the admin app
(`admin.py` through `asgi_bridge.py`), health checks (`health.py`) and metrics (`metrics.py`).
See docs/router-internals.md.
"""

from sglr.router.policy import ROUTER_POLICIES, Router, RouterConfig

__all__ = ["ROUTER_POLICIES", "Router", "RouterConfig"]
