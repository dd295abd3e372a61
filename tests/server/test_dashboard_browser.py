"""`/dashboard` in a real headless browser (Debian's chromium + chromedriver through selenium), over
a server with an API key. (The tree summary from a worker process, sglr-server's default layout:
tests/engine/test_engine_workers.py.)

The page loads without console errors, shows the numbers `/metrics` and `/dashboard/data` show,
its charts grow as it polls, and its tree view shows the prefix that requests shared. A screenshot
is kept (its path printed). Without chromium the browser test skips, saying how to install it
(`scripts/test` installs it where apt can)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_harness import Served, served_engine

from sglr.server import ServerSettings

KEY = "sk-dashboard-test"
AUTH = {"Authorization": f"Bearer {KEY}"}
SYSTEM = "You are a careful assistant. Answer every question in one short word, and never explain. "
QUESTIONS = ("What is red?", "Name a fruit.", "Say hello.")


@pytest.fixture(scope="module")
def served(tiny_dir: Path) -> Iterator[Served]:
    settings = ServerSettings(enable_metrics=True, api_key=KEY)
    with served_engine(tiny_dir, settings) as s:
        with httpx.Client(base_url=s.url, headers=AUTH, timeout=60) as client:
            for question in QUESTIONS:
                body = {"text": SYSTEM + question, "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
                assert client.post("/generate", json=body).status_code == 200
        s.wait_idle()
        yield s


def _metrics(served: Served) -> dict[str, float]:
    text = httpx.get(f"{served.url}/metrics", timeout=30).text
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = sample.name + "".join(
                f"/{sample.labels[k]}" for k in ("finish_reason",) if k in sample.labels
            )
            values[key] = values.get(key, 0.0) + sample.value
    return values


def _data(served: Served, **params: int) -> dict:
    response = httpx.get(f"{served.url}/dashboard/data", params=params, headers=AUTH, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_data_needs_the_key_and_is_bounded(served: Served) -> None:
    assert httpx.get(f"{served.url}/dashboard/data", timeout=30).status_code == 401
    for path in ("/dashboard", "/dashboard/dashboard.js"):  # the page and script hold no data
        assert httpx.get(f"{served.url}{path}", timeout=30).status_code == 200
    bad = httpx.get(f"{served.url}/dashboard/data", params={"max_nodes": "many"}, headers=AUTH, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "max_nodes"
    tree = _data(served, max_nodes=1)["tree"]
    assert len(tree["nodes"]) == 1 and tree["num_nodes"] >= 4  # the shared prefix and three tails


def test_the_json_agrees_with_metrics_and_shows_the_shared_prefix(served: Served) -> None:
    metrics, data = _metrics(served), _data(served)
    assert data["requests"]["finished"] == {"length": len(QUESTIONS)}
    assert metrics["sglr:num_requests_total/length"] == len(QUESTIONS)
    for key, name in (
        ("prompt", "prompt_tokens"),
        ("generation", "generation_tokens"),
        ("cached", "cached_tokens"),
    ):
        assert data["tokens"][key] == metrics[f"sglr:{name}_total"], key
    assert data["tokens"]["generation"] == 4 * len(QUESTIONS)
    assert data["kv"]["cached"] == metrics["sglr:num_cached_tokens"] == data["tree"]["num_cached_tokens"]
    assert data["kv"]["used"] + data["kv"]["free"] == data["kv"]["num_slots"]
    shared = [n for n in data["tree"]["nodes"] if n["num_hits"] >= len(QUESTIONS)]
    assert shared and shared[0]["text"] and shared[0]["text"].strip() in SYSTEM


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip(
            "no chromium/chromedriver: `apt-get install -y chromium chromium-driver` (scripts/test does)"
        )
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1300"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    try:
        yield driver
    finally:
        driver.quit()


def _wait_for(condition, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, "the page did not get there"
        time.sleep(0.1)


# Read in one script: the page redraws as it polls, so elements found earlier go stale.
_PAGE_STATE = """
const text = (id) => { const e = document.getElementById(id); return e ? e.textContent.replaceAll(",", "") : null; };
return {
  polls: Number(document.body.dataset.numPolls || 0),
  numbers: Object.fromEntries(["stat-prompt-tokens", "stat-generation-tokens", "stat-finished-length",
                               "kv-cached"].map((id) => [id, text(id)])),
  points: Number(document.getElementById("chart-throughput").dataset.numPoints),
  nodes: [...document.querySelectorAll("#tree-view g.prefix-node")].map((g) => [Number(g.dataset.hits), g.dataset.text]),
  top: [...document.querySelectorAll("#top-prefixes li.top-prefix")].map((li) => li.textContent),
  tierHidden: document.getElementById("kv-tier-panel").hidden,
  waiting: document.getElementById("waiting-caption").textContent,
  adapters: [...document.querySelectorAll("#lora-traffic tr.lora-row")].map((tr) => [tr.dataset.name, Number(tr.dataset.numRequests)]),
};
"""


def test_the_page_shows_live_numbers_charts_and_the_tree(
    served: Served, browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    browser.get(f"{served.url}/dashboard?interval_ms=300#key={KEY}")
    state = lambda: browser.execute_script(_PAGE_STATE)  # noqa: E731
    _wait_for(lambda: state()["polls"] >= 2)
    data, metrics = _data(served), _metrics(served)
    expected = {
        "stat-prompt-tokens": str(int(metrics["sglr:prompt_tokens_total"])),
        "stat-generation-tokens": str(int(metrics["sglr:generation_tokens_total"])),
        "stat-finished-length": str(len(QUESTIONS)),
        "kv-cached": str(data["kv"]["cached"]),
    }
    assert expected["stat-prompt-tokens"] == str(data["tokens"]["prompt"])

    def numbers_shown() -> dict | None:
        page = state()
        return page if page["numbers"] == expected else None

    shown = _wait_for(numbers_shown)

    before = shown["points"]
    _wait_for(lambda: state()["points"] > before)  # the chart drew another sample

    shared = [text for hits, text in shown["nodes"] if hits >= len(QUESTIONS)]
    assert shared and shared[0].strip() and shared[0].strip() in SYSTEM
    assert shown["top"] and SYSTEM.split(".")[0] in shown["top"][0] and " hits" in shown["top"][0]

    assert shown["tierHidden"]  # no second KV tier on this server
    assert shown["waiting"] == "nothing waiting"  # the server is idle
    assert shown["adapters"] == [["base", len(QUESTIONS)]]

    path = tmp_path_factory.mktemp("dashboard") / "dashboard.png"
    browser.save_screenshot(str(path))
    print(f"dashboard screenshot: {path}")
    assert path.stat().st_size > 10_000
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
