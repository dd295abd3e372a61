"""The router's cache-aware choice from Python, per request: `Router.route` + `finish` on the
traces of `radix_overhead.py` (paper: 128 requests, heavy: 2,000 requests of 1-4k tokens), two
replicas, each pass on a fresh `Router`, keys as u32 arrays (what the router's HTTP front
hands it). Binding crossing, lock, load bookkeeping and the trees included.

Prints best-of-N and median wall time per pass and per request. To compare two checkouts, run
it with each one's `python/` on PYTHONPATH, alternating.

    python benches/router_route.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

# OpenBLAS helper threads spin after use and would steal the second core from the measurement.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(__file__))


def route_pass(trace: list) -> float:
    from sglr.router import Router, RouterConfig

    router = Router([0, 1], RouterConfig(policy="cache-aware"))
    started = time.perf_counter()
    for key in trace:
        router.finish(router.route(key))
    elapsed = time.perf_counter() - started
    router.check_invariants()
    return elapsed


def main() -> None:
    import numpy as np

    from radix_overhead import grouped_trace

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    traces = {
        "paper (128 req)": grouped_trace(1, 16, 8, (256, 256), (256, 256)),
        "heavy (2,000 req)": grouped_trace(2, 32, 63, (512, 2048), (256, 2048))[:2000],
    }
    print(f"| trace | best ms | median ms | us/request (best) |  # {args.repeat} passes")
    print("| --- | ---: | ---: | ---: |")
    for name, trace in traces.items():
        keys = [key.astype(np.uint32) for key in trace]
        times = [route_pass(keys) for _ in range(args.repeat)]
        best = min(times)
        print(
            f"| {name} | {best * 1e3:.3f} | {statistics.median(times) * 1e3:.3f} | {best * 1e6 / len(keys):.2f} |"
        )


if __name__ == "__main__":
    main()
