"""`sglr-router`'s `/dashboard/data`: each worker's health, load, tree keys and requests, over
scripted workers (which serve no Prometheus text: their cache figures stay null)."""

from __future__ import annotations

import httpx
from test_router_fast_path import Harness


def test_the_router_dashboard_lists_every_worker() -> None:
    harness = Harness()
    try:
        with httpx.Client(base_url=harness.url, timeout=30) as client:
            for text in ("a", "b", "c"):
                assert client.post("/generate", json={"text": text}).status_code == 200
            assert client.get("/dashboard").status_code == 200
            data = client.get("/dashboard/data").json()
        assert data["role"] == "router"
        rows = {row["url"]: row for row in data["workers"]}
        assert set(rows) == {w.url for w in harness.workers}
        assert sum(row["num_requests"] for row in rows.values()) == 3
        assert all(row["healthy"] and row["load"] == 0 for row in rows.values())
        assert sum(row["request_share"] for row in rows.values()) == 1.0
        assert all(row["hit_rate"] is None for row in rows.values())
    finally:
        harness.close()
