"""`sglr-router` / `python -m sglr.router`: a cache-aware router in front of running
`sglr-server`s (any machines), as its own process.

    sglr-router --worker-urls http://10.0.0.1:30001 http://10.0.0.2:30001 --port 30000

The port is bound first (a busy port fails at once); the listening address is printed once the
router accepts requests; SIGTERM / SIGINT stop it cleanly (requests in flight get
`--shutdown-timeout` seconds), leaving the workers running: a new router over the same URLs
picks up where this one left off (its prefix trees start empty).
"""

from __future__ import annotations

import argparse
import sys

from sglr.http.listen import LOG_LEVELS, add_listen_arguments, configure_logging, listen, run_event_loop
from sglr.limits import MAX_BODY_BYTES
from sglr.router.policy import ROUTER_POLICIES, RouterConfig


def build_parser() -> argparse.ArgumentParser:
    defaults = RouterConfig()
    parser = argparse.ArgumentParser(
        prog="sglr-router",
        description="Route requests over sglr-server workers by cache affinity and load.",
        allow_abbrev=False,
    )
    add = parser.add_argument
    add("--worker-urls", nargs="*", default=[], help="workers to start with (more: POST /add_worker?url=)")
    add_listen_arguments(parser)
    add("--policy", choices=ROUTER_POLICIES, default=defaults.policy, help="how workers share requests")
    add(
        "--balance-abs-threshold",
        type=int,
        default=defaults.balance_abs_threshold,
        help="load counts as imbalanced past this many in-flight requests between workers ...",
    )
    add(
        "--balance-rel-threshold",
        type=float,
        default=defaults.balance_rel_threshold,
        help="... and past this ratio; then the least-loaded worker gets the request",
    )
    add(
        "--cache-threshold",
        type=float,
        default=defaults.cache_threshold,
        help="fraction of a prompt matched on a worker for cache affinity to apply",
    )
    add(
        "--max-tree-size",
        type=int,
        default=defaults.max_keys_per_tree,
        help="keys (characters or tokens) remembered per worker; least recently routed go first",
    )
    add("--health-check-interval", type=float, default=2.0, help="seconds between health checks")
    add(
        "--health-failure-threshold",
        type=int,
        default=2,
        help="failed checks in a row before a worker leaves",
    )
    add("--max-retries", type=int, default=2, help="other workers to try when one breaks off before replying")
    add("--request-timeout", type=float, default=None, help="seconds a worker may take (default: no limit)")
    add("--api-key", default=None, help="require 'Authorization: Bearer <key>'; forwarded to the workers")
    add(
        "--max-body-bytes",
        type=int,
        default=MAX_BODY_BYTES,
        help="largest request body accepted, on every route (default: 32 MiB)",
    )
    add("--shutdown-timeout", type=float, default=10.0, help="seconds requests get to finish on SIGTERM")
    add("--log-level", choices=LOG_LEVELS, default="info")
    add("--random-seed", type=int, default=0, help="seed of the random policy")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    from sglr.errors import SglrError
    from sglr.router.admin import build_router_app
    from sglr.router.server import serve_router
    from sglr.router.state import RouterSettings
    from sglr.router.workers import WorkerPool

    try:
        config = RouterConfig(
            policy=args.policy,
            balance_abs_threshold=args.balance_abs_threshold,
            balance_rel_threshold=args.balance_rel_threshold,
            cache_threshold=args.cache_threshold,
            max_keys_per_tree=args.max_tree_size,
            seed=args.random_seed,
        )
        # Workers given on the command line are trusted up: a dead one leaves at its first
        # failed request or health check.
        pool = WorkerPool(args.worker_urls, config)
        if args.health_failure_threshold < 1 or args.max_retries < 0 or args.health_check_interval <= 0:
            raise ValueError(
                "--health-failure-threshold >= 1, --max-retries >= 0, --health-check-interval > 0"
            )
        settings = RouterSettings(
            health_check_interval_s=args.health_check_interval,
            health_failure_threshold=args.health_failure_threshold,
            max_retries=args.max_retries,
            request_timeout_s=args.request_timeout,
            api_key=args.api_key,
            max_body_bytes=args.max_body_bytes,
        )
    except (SglrError, ValueError) as exc:
        print(f"sglr-router: {exc}", file=sys.stderr)
        return 2
    num_workers = len(args.worker_urls)
    listener = listen(args.host, args.port, "sglr-router")
    try:
        serving = serve_router(
            build_router_app(pool, settings),
            listener.sock,
            shutdown_timeout_s=args.shutdown_timeout,
            on_ready=lambda: listener.announce(f"routing to {num_workers} workers"),
        )
        run_event_loop(serving)
    finally:
        listener.close()
    print("sglr-router: shut down", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
