"""`/debug/check_invariants`: the engine's accounting checked on demand over HTTP (soak runs read
it on every server at the end), with its stats; a violated invariant is a 500 that names it."""

from __future__ import annotations

import httpx
import pytest
from server_harness import Served


@pytest.mark.tp2
def test_check_invariants_after_requests_reports_an_idle_engine(served: Served) -> None:
    body = {"text": "Hello", "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
    assert httpx.post(f"{served.url}/generate", json=body, timeout=60).status_code == 200
    served.wait_idle()
    response = httpx.get(f"{served.url}/debug/check_invariants", timeout=60)
    assert response.status_code == 200
    report = response.json()
    assert report["ok"] is True
    stats = report["stats"]
    assert stats["num_running_requests"] == 0
    assert stats["num_free_kv_slots"] + stats["num_cached_kv_slots"] == stats["num_kv_slots"]


def test_a_violated_invariant_is_a_500_naming_it(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise AssertionError("12 slots leaked")

    monkeypatch.setattr(served.engine, "check_invariants", broken)
    response = httpx.get(f"{served.url}/debug/check_invariants", timeout=60)
    assert response.status_code == 500
    assert "invariant violated: AssertionError: 12 slots leaked" in response.text
