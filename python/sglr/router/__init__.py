"""Data-parallel routing: which engine replica serves a request (see docs/ARCHITECTURE.md)."""

from sglr.router.policy import ROUTER_POLICIES, Router, RouterConfig

__all__ = ["ROUTER_POLICIES", "Router", "RouterConfig"]
