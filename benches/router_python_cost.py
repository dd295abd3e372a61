"""The Python `sglr-router` runs per routed request, without sockets: its client and worker
protocols on stand-in transports in one process, so the number moves only with the code (not
with the kernel or the other processes on a shared machine).

A request goes in as the bytes httpx sends; the worker's answer comes back one loop callback
after the router wrote the request to it. Reported per tree (each in its own process, run in
turn): the process's CPU time per request (best of 5 rounds; the loop's own share included),
and the median time of each leg: client bytes in -> request written to the worker, worker
bytes in -> answer written to the client (what the router adds to a request's latency, warm).

    python benches/router_python_cost.py --tree main=/work/main/python --tree new=python
    python benches/router_python_cost.py --tree new=python --prompt-len 288
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

_RESPONSE = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"text":""}'


class _Transport:
    def __init__(self, on_write) -> None:  # type: ignore[no-untyped-def]
        self.write = on_write

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1)

    def close(self) -> None:
        pass

    abort = pause_reading = resume_reading = close


async def _measure(prompt_len: int, num: int) -> dict[str, float]:
    from sglr.router.workers import WorkerPool

    try:
        from sglr.router.admin import build_router_app
        from sglr.router.front import ClientConnection
        from sglr.router.proxy import ProxyContext
        from sglr.router.server import build_dispatch
        from sglr.router.state import RouterSettings
        from sglr.router.upstream import UpstreamConnection, UpstreamPools
    except ImportError:  # a tree from before the router was its own package
        from sglr.server.router_app import RouterSettings, build_router_app  # type: ignore[no-redef]
        from sglr.server.router_front import ClientConnection  # type: ignore[no-redef]
        from sglr.server.router_proxy import ProxyContext  # type: ignore[no-redef]
        from sglr.server.router_server import build_dispatch  # type: ignore[no-redef]
        from sglr.server.router_upstream import UpstreamConnection, UpstreamPools  # type: ignore[no-redef]

    body = json.dumps({"input_ids": list(range(1, prompt_len + 1)), "sampling_params": {"max_new_tokens": 1}})
    request = (
        b"POST /generate HTTP/1.1\r\nhost: 127.0.0.1:1\r\naccept: */*\r\naccept-encoding: gzip, deflate\r\n"
        b"connection: keep-alive\r\nuser-agent: python-httpx/0.28.1\r\ncontent-length: %d\r\n"
        b"content-type: application/json\r\n\r\n%b" % (len(body), body.encode())
    )
    loop = asyncio.get_running_loop()
    url = "http://127.0.0.1:1"
    pool = WorkerPool([url])
    app = build_router_app(pool, RouterSettings(health_check_interval_s=3600))
    state = app.state.sglr_router
    upstreams = UpstreamPools(5.0)
    state.proxy = ProxyContext(pool, upstreams, state.metrics, 2, None)
    marks: dict[str, float] = {}

    def worker_reads(data: bytes) -> None:
        marks["sent"] = time.perf_counter()
        loop.call_soon(worker_answers)

    def worker_answers() -> None:
        marks["answer_in"] = time.perf_counter()
        upstream.data_received(_RESPONSE)

    worker_connections = upstreams.get(url)
    upstream = UpstreamConnection(worker_connections)
    upstream.connection_made(_Transport(worker_reads))  # type: ignore[arg-type]
    upstream.num_exchanges = 1  # as a kept-alive connection
    worker_connections.release(upstream)
    answered: asyncio.Future[None] | None = None

    def client_reads(data: bytes) -> None:
        marks["answered"] = time.perf_counter()
        assert answered is not None and data.startswith(b"HTTP/1.1 200"), data[:80]
        answered.set_result(None)

    client = ClientConnection(build_dispatch(app, state), set())
    client.connection_made(_Transport(client_reads))  # type: ignore[arg-type]

    async def one() -> tuple[float, float]:
        nonlocal answered
        answered = loop.create_future()
        started = time.perf_counter()
        client.data_received(request)
        await answered
        return marks["sent"] - started, marks["answered"] - marks["answer_in"]

    for _ in range(2000):  # warm
        await one()
    rounds, request_legs, answer_legs = [], [], []
    for _ in range(5):
        started = time.process_time()  # CPU time: other processes on the machine do not count
        for _ in range(num):
            request_leg, answer_leg = await one()
            request_legs.append(request_leg)
            answer_legs.append(answer_leg)
        rounds.append((time.process_time() - started) / num)
    return {
        "per_request_us": min(rounds) * 1e6,
        "request_leg_us": statistics.median(request_legs) * 1e6,
        "answer_leg_us": statistics.median(answer_legs) * 1e6,
    }


def _run_here(prompt_len: int, num: int) -> None:
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(_measure(prompt_len, num))
    else:
        result = uvloop.run(_measure(prompt_len, num))
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a python/ source tree")
    parser.add_argument("--requests", type=int, default=10000, help="requests per round")
    parser.add_argument("--prompt-len", type=int, default=3, help="token ids in each request")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _run_here(args.prompt_len, args.requests)
        return
    print(
        f"{args.requests} x 5 requests of {args.prompt_len} token ids, load average (1 min) {os.getloadavg()[0]:.2f}"
    )
    print("| router | us per request | request leg us | answer leg us |")
    print("| --- | ---: | ---: | ---: |")
    for name, tree in (spec.split("=", 1) for spec in args.tree):
        env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
        argv = [sys.executable, __file__, "--child", "--tree", f"{name}={tree}",
                "--requests", str(args.requests), "--prompt-len", str(args.prompt_len)]  # fmt: skip
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        print(
            f"| {name} | {result['per_request_us']:.1f} | {result['request_leg_us']:.1f} | "
            f"{result['answer_leg_us']:.1f} |"
        )


if __name__ == "__main__":
    main()
