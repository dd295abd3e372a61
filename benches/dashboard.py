"""The dashboard's costs: the tree summary and `/dashboard/data` on 100k cached tokens, the page's
load time in headless chromium, and serving throughput with the page open vs closed.

    python benches/dashboard.py --part tree         # RadixTree.summarize on synthetic trees
    python benches/dashboard.py --part endpoint     # a live server, ~100k cached tokens, + page load
    python benches/dashboard.py --part throughput   # paired runs, page closed / open (--runs 3 --seconds 20)
    python benches/dashboard.py --part screenshot --out docs/images/dashboard.png

The server is sglr-server's default layout (the scheduler in a worker process) over the seeded
tiny model on CPU, so the engine's own work is small and any cost of watching shows the most.
Results: benches/results/dashboard.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import httpx
import numpy as np

from sglr._core import RadixTree
from sglr.engine.engine import Engine
from sglr.engine.kv.tree_summary import TreeSummaryLimits, summarize_tree

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "river",
    "stone",
    "cloud",
    "maple",
    "quiet",
    "green",
    "orbit",
    "lantern",
    "copper",
]


def synthetic_tree(num_groups: int, shared_len: int, num_branches: int, branch_len: int) -> RadixTree:
    rng = np.random.default_rng(0)
    tree, next_slot = RadixTree(), 0
    for _ in range(num_groups):
        prefix = rng.integers(1, 30_000, size=shared_len, dtype=np.int32)
        for _ in range(num_branches):
            tokens = np.concatenate([prefix, rng.integers(1, 30_000, size=branch_len, dtype=np.int32)])
            slots = np.arange(next_slot, next_slot + tokens.size, dtype=np.int32)
            next_slot += tokens.size
            _, node = tree.insert_with_node(tokens, slots)
            tree.lock(node)
            tree.unlock(node)
    return tree


def timed(fn, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def part_tree(repeat: int) -> None:
    print("| tree | cached tokens | nodes | summarize (64 nodes) median | best |")
    print("|---|---|---|---|---|")
    shapes = {
        "100 prompts x 4 branches (500 + 4x125)": (100, 500, 4, 125),
        "2,500 prompts x 4 branches (20 + 4x5)": (2500, 20, 4, 5),
        "1,000 prompts x 8 branches (500 + 8x62), 1M tokens": (1000, 500, 8, 62),
    }
    for name, shape in shapes.items():
        tree = synthetic_tree(*shape)
        times = timed(lambda tree=tree: summarize_tree(tree, TreeSummaryLimits()), repeat)
        print(
            f"| {name} | {tree.total_size():,} | {tree.num_nodes():,} | "
            f"{statistics.median(times) * 1e3:.2f} ms | {min(times) * 1e3:.2f} ms |"
        )


@contextlib.contextmanager
def server(max_total_tokens: int = 140_000) -> Iterator[tuple[str, Engine]]:
    from sglr.http.background import serve_in_background
    from sglr.server import ServerSettings, build_app
    from sglr.testing.tiny import tiny_model_path

    engine = Engine(
        model_path=str(tiny_model_path("llama")),
        device="cpu",
        multiprocess=True,
        max_total_tokens=max_total_tokens,
        context_length=4096,
    )
    try:
        with serve_in_background(build_app(engine, ServerSettings(enable_metrics=True))) as url:
            yield url, engine
    finally:
        engine.shutdown()


def prompt(rng: np.random.Generator, num_words: int) -> str:
    return " ".join(rng.choice(WORDS, size=num_words))


def fill_cache(url: str, num_tokens: int) -> None:
    """Shared-prefix programs until the prefix cache holds about `num_tokens`."""
    rng = np.random.default_rng(1)
    with httpx.Client(base_url=url, timeout=300) as client:
        while True:
            data = client.get("/dashboard/data")
            data.raise_for_status()
            if data.json()["kv"]["cached"] >= num_tokens:
                break
            system = prompt(rng, 400)
            texts = [system + " " + prompt(rng, 150) for _ in range(4)]
            body = {"text": texts, "sampling_params": {"max_new_tokens": 1}}
            assert client.post("/generate", json=body).status_code == 200


@contextlib.contextmanager
def browser() -> Iterator[object]:
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1250"):
        options.add_argument(argument)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver") or "chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def wait_polls(driver, num_polls: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while int(driver.execute_script("return Number(document.body.dataset.numPolls || 0)")) < num_polls:
        if time.monotonic() > deadline:
            raise RuntimeError("the page did not poll")
        time.sleep(0.02)


def part_endpoint(repeat: int) -> None:
    with server() as (url, _):
        fill_cache(url, 100_000)
        with httpx.Client(base_url=url, timeout=60) as client:
            body = client.get("/dashboard/data").content
            times = timed(lambda: client.get("/dashboard/data").raise_for_status(), repeat)
            stats = client.get("/dashboard/data").json()
        print(f"cached tokens {stats['kv']['cached']:,}, tree nodes {stats['tree']['num_nodes']:,}")
        print(f"/dashboard/data over loopback: median {statistics.median(times) * 1e3:.2f} ms, "
              f"p90 {sorted(times)[int(0.9 * len(times))] * 1e3:.2f} ms, best {min(times) * 1e3:.2f} ms, "
              f"{len(body):,} bytes")  # fmt: skip
        with browser() as driver:
            loads = []
            for _ in range(5):
                start = time.perf_counter()
                driver.get(f"{url}/dashboard")
                wait_polls(driver, 1)
                loads.append(time.perf_counter() - start)
            nav = driver.execute_script(
                "const t = performance.getEntriesByType('navigation')[0]; return [t.domContentLoadedEventEnd, t.loadEventEnd]"
            )
        print(f"page load to first drawn data: median {statistics.median(loads) * 1e3:.0f} ms, "
              f"best {min(loads) * 1e3:.0f} ms (DOMContentLoaded {nav[0]:.0f} ms, load {nav[1]:.0f} ms)")  # fmt: skip


def load_run(url: str, seconds: float, num_clients: int) -> float:
    """Generated tokens per second over `seconds` from `num_clients` closed-loop clients."""
    stop_at = time.monotonic() + seconds
    counts = [0] * num_clients

    def client_loop(i: int) -> None:
        rng = np.random.default_rng(100 + i)
        with httpx.Client(base_url=url, timeout=120) as client:
            while time.monotonic() < stop_at:
                body = {"text": "shared system text " * 20 + prompt(rng, 20),
                        "sampling_params": {"max_new_tokens": 32, "ignore_eos": True}}  # fmt: skip
                out = client.post("/generate", json=body).json()
                counts[i] += out["meta_info"]["completion_tokens"]

    start = time.monotonic()
    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(num_clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - start)


def worker_cpu_s(engine: Engine) -> float:
    """CPU seconds the engine's worker processes (scheduler and model) have used."""
    import psutil

    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in engine.worker_pids)


def part_throughput(runs: int, seconds: float, num_clients: int) -> None:
    """Wall-clock tokens/s (noisy on a shared machine) and the engine's CPU time per generated
    token (what watching would take from the engine; other jobs barely move it)."""
    with server() as (url, engine), browser() as driver:
        load_run(url, 5, num_clients)  # warm-up
        rows = []
        for _ in range(runs):
            for page in ("about:blank", f"{url}/dashboard"):
                driver.get(page)
                cpu_before, tokens_before = worker_cpu_s(engine), engine.get_stats()["num_generated_tokens"]
                rate = load_run(url, seconds, num_clients)
                num_tokens = engine.get_stats()["num_generated_tokens"] - tokens_before
                rows.append((rate, (worker_cpu_s(engine) - cpu_before) / num_tokens * 1e3))
        polls = int(driver.execute_script("return Number(document.body.dataset.numPolls || 0)"))
    closed, opened = rows[0::2], rows[1::2]
    print("| run | closed tok/s | open tok/s | closed engine CPU ms/token | open engine CPU ms/token |")
    print("|---|---|---|---|---|")
    for i, (c, o) in enumerate(zip(closed, opened, strict=True)):
        print(f"| {i + 1} | {c[0]:.1f} | {o[0]:.1f} | {c[1]:.3f} | {o[1]:.3f} |")
    mean = lambda values: statistics.mean(values)  # noqa: E731
    print(f"| mean | {mean(c[0] for c in closed):.1f} | {mean(o[0] for o in opened):.1f} | "
          f"{mean(c[1] for c in closed):.3f} | {mean(o[1] for o in opened):.3f} |")  # fmt: skip
    print(f"(the last open page polled {polls} times)")


def part_screenshot(out: Path, seconds: float) -> None:
    with server() as (url, _), browser() as driver:
        driver.get(f"{url}/dashboard")
        fill_cache(url, 12_000)  # a few shared-prefix programs for the tree view
        load_run(url, seconds, 4)
        wait_polls(driver, 3)
        time.sleep(1.5)
        driver.save_screenshot(str(out))
    print(f"screenshot: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part", choices=("tree", "endpoint", "throughput", "screenshot"), required=True)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("docs/images/dashboard.png"))
    args = parser.parse_args()
    if args.part == "tree":
        part_tree(args.repeat)
    elif args.part == "endpoint":
        part_endpoint(args.repeat)
    elif args.part == "throughput":
        part_throughput(args.runs, args.seconds, args.clients)
    else:
        part_screenshot(args.out, args.seconds)


if __name__ == "__main__":
    main()
