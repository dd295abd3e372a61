"""`sglr-server` / `python -m sglr`: command line -> engine -> app -> uvicorn.

The port is bound before the model loads (a busy port fails at once), the listening address is
printed once the server accepts requests, and SIGTERM / SIGINT shut down cleanly: no new
connections, running requests get `--shutdown-timeout` seconds to finish (then they are
aborted), the engine stops, exit status 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from sglr.engine.config import SCHEDULE_POLICIES
from sglr.errors import EngineConfigError
from sglr.http.listen import (
    LOG_LEVELS,
    Listener,
    add_listen_arguments,
    configure_logging,
    listen,
    run_event_loop,
)
from sglr.router.policy import ROUTER_POLICIES
from sglr.server.flag_tables import add_limit_arguments, add_table_arguments, table_options
from sglr.server.openai.batches.flags import batch_settings

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
_BUILTIN_TEMPLATES = {"chatml": CHATML_TEMPLATE}
# After aborting what still runs at shutdown, how long responses get to finish before uvicorn
# cancels them.
_ABORT_GRACE_S = 5.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglr-server",
        description="Serve a model over SGLang's native HTTP API and the OpenAI-compatible API.",
        allow_abbrev=False,
    )
    add = parser.add_argument
    add(
        "--model-path",
        "--model",
        dest="model_path",
        default=None,
        help="local model directory, .gguf file or Hub id (default: the embedded SmolLM2-135M-Instruct)",
    )
    add_listen_arguments(parser)
    add(
        "--api-key",
        default=None,
        help="require 'Authorization: Bearer <key>' (health and metrics are exempt)",
    )
    add(
        "--served-model-name",
        default=None,
        help="model name in /v1/models and responses (default: the checkpoint's name)",
    )
    add("--chat-template", default=None, help="Jinja chat template: a file, an inline template, or 'chatml'")
    add("--dtype", default="auto", choices=("auto", "half", "float16", "bfloat16", "float", "float32"))
    add("--device", default="auto", help="auto, cpu or cuda")
    add(
        "--gguf-weights",
        default="auto",
        choices=("auto", "quantized", "dequantized"),
        help="GGUF on CPU: keep Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q4_K/Q5_K/Q6_K weights as stored (quantized, bf16; auto: where it applies) or dequantize all",
    )
    add("--context-length", type=int, default=None, help="longest sequence (default: the model's)")
    add("--load-format", default="auto", choices=("auto", "dummy"), help="dummy: random weights (benchmarks)")
    add("--max-total-tokens", type=int, default=None, help="KV cache size in tokens")
    add("--mem-fraction-static", type=float, default=None, help="GPU memory fraction for weights + KV cache")
    add("--max-running-requests", type=int, default=None)
    add("--chunked-prefill-size", type=int, default=None, help="prefill tokens per step")
    add("--schedule-policy", default="lpm", choices=SCHEDULE_POLICIES)
    add("--disable-radix-cache", action="store_true", help="no prefix caching")
    add("--disable-jump-forward", action="store_true", help="constrained output one token at a time")
    add("--json-schema-any-order", action="store_true", help="JSON objects' properties in any order")
    add("--random-seed", type=int, default=0)
    add(
        "--tp-size",
        "--tensor-parallel-size",
        dest="tp_size",
        type=int,
        default=1,
        help="tensor-parallel ranks, one worker process each (gloo on CPU, NCCL on GPU)",
    )
    add("--dist-init-addr", default=None, help="host:port where the tensor-parallel ranks meet")
    add("--nccl-port", type=int, default=None, help="local port for the ranks to meet (default: a free one)")
    add(
        "--nnodes",
        type=int,
        default=1,
        help="machines the tensor-parallel group spans (tp-size/nnodes ranks each)",
    )
    add(
        "--node-rank",
        type=int,
        default=0,
        help="this machine's place among --nnodes; 0 serves HTTP, the others run only their ranks",
    )
    add(
        "--base-gpu-id",
        type=int,
        default=0,
        help="GPU of a node's first rank; local rank r uses base-gpu-id + r",
    )
    add(
        "--dp-size",
        "--data-parallel-size",
        dest="dp_size",
        type=int,
        default=1,
        help="engine replicas behind this front, each its own tp group (replica i from GPU base + i*tp)",
    )
    add(
        "--router-policy",
        choices=ROUTER_POLICIES,
        default="cache-aware",
        help="how --dp-size replicas share requests",
    )
    add(
        "--single-process",
        action="store_true",
        help="run the scheduler and the model in the server process (tp-size 1 only)",
    )
    add("--enable-metrics", action="store_true", help="serve Prometheus metrics at /metrics")
    add(
        "--incremental-streaming-output",
        action="store_true",
        help="native /generate streams send deltas instead of the cumulative text",
    )
    add(
        "--allow-image-urls",
        action="store_true",
        help="accept images given as http(s) URLs (default: data URLs / base64 only)",
    )
    many: dict[str, Any] = {"nargs": "+", "action": "extend", "default": []}
    add(
        "--allowed-image-url-networks",
        metavar="CIDR",
        **many,
        help="with --allow-image-urls: non-public networks image URLs may reach too (default: public addresses only)",
    )
    add(
        "--allowed-local-media-path",
        dest="allowed_local_media_paths",
        metavar="DIR",
        **many,
        help="accept images given as paths (or file:// URLs) of files inside DIR (default: none)",
    )
    add_limit_arguments(parser)
    add_table_arguments(parser)
    add(
        "--shutdown-timeout",
        type=float,
        default=10.0,
        help="seconds running requests get to finish after SIGTERM before they are aborted",
    )
    add("--log-level", default="info", type=str.lower, choices=LOG_LEVELS)
    return parser  # fmt: skip


def _chat_template(value: str | None) -> str | None:
    if value is None or value in _BUILTIN_TEMPLATES:
        return None if value is None else _BUILTIN_TEMPLATES[value]
    if Path(value).is_file() or "{{" in value or "{%" in value:
        return value
    raise SystemExit(
        f"sglr-server: --chat-template {value!r} is not a file, a Jinja template or one of: chatml"
    )


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    dtype = {"half": "float16", "float": "float32"}.get(args.dtype, args.dtype)
    return {
        "served_model_name": args.served_model_name,
        "chat_template": _chat_template(args.chat_template),
        "dtype": dtype,
        "device": args.device,
        "load_format": args.load_format,
        "gguf_weights": args.gguf_weights,
        "max_total_tokens": args.max_total_tokens,
        "mem_fraction_static": args.mem_fraction_static,
        "context_length": args.context_length,
        "max_running_requests": args.max_running_requests,
        "chunked_prefill_size": args.chunked_prefill_size,
        "schedule_policy": args.schedule_policy,
        "disable_radix_cache": args.disable_radix_cache,
        "disable_jump_forward": args.disable_jump_forward,
        "json_schema_any_order": args.json_schema_any_order,
        "seed": args.random_seed,
        "log_level": args.log_level,
        "tp_size": args.tp_size,
        "multiprocess": not args.single_process,
        "dist_init_addr": args.dist_init_addr,
        "nccl_port": args.nccl_port,
        "base_gpu_id": args.base_gpu_id,
        "nnodes": args.nnodes,
        "node_rank": args.node_rank,
        "max_images_per_request": args.max_images_per_request,
        "max_image_bytes": args.max_image_bytes,
        "max_image_pixels": args.max_image_pixels,
    } | table_options(args)


def _build_engine(args: argparse.Namespace, engine_class: Any) -> Any:
    if args.dp_size == 1:
        return engine_class(model_path=args.model_path, **engine_options(args))
    if args.is_embedding:  # DataParallelEngine routes generation only
        raise EngineConfigError("--is-embedding does not combine with --dp-size > 1")
    from sglr.data_parallel import DataParallelEngine
    from sglr.router.policy import RouterConfig

    return DataParallelEngine(
        args.model_path,
        dp_size=args.dp_size,
        router_config=RouterConfig(policy=args.router_policy, seed=args.random_seed or 0),
        **engine_options(args),
    )


def _run_follower_node(args: argparse.Namespace) -> int:
    """`--node-rank K > 0`: this machine's ranks of the group node 0 serves; no HTTP."""
    from sglr.engine.config import EngineConfig
    from sglr.engine.runner_settings import runner_config_for
    from sglr.engine.worker.node import run_follower_node
    from sglr.errors import SglrError

    try:
        if args.dp_size != 1:
            raise ValueError("--dp-size > 1 cannot be combined with --nnodes > 1")
        cfg = EngineConfig.from_kwargs(model_path=args.model_path, **engine_options(args))
        runner_config = runner_config_for(cfg)
    except (SglrError, ValueError, OSError) as exc:
        print(f"sglr-server: {exc}", file=sys.stderr)
        return 2
    ranks = cfg.local_ranks
    print(
        f"sglr-server: node {cfg.node_rank} of {cfg.nnodes}: ranks {ranks.start}-{ranks.stop - 1} "
        f"joining {cfg.dist_init_addr}",
        flush=True,
    )
    try:
        code = run_follower_node(cfg, runner_config)
    except (SglrError, ValueError, OSError) as exc:
        print(f"sglr-server: {exc}", file=sys.stderr)
        return 2
    print("sglr-server: shut down", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    if args.node_rank != 0:
        return _run_follower_node(args)
    listener = listen(args.host, args.port, "sglr-server")

    from sglr.engine.engine import Engine
    from sglr.errors import SglrError
    from sglr.server.app import build_app
    from sglr.server.settings import ServerSettings

    try:
        # The server's own settings first: a bad one fails before the model loads.
        settings = ServerSettings(
            api_key=args.api_key,
            enable_metrics=args.enable_metrics,
            incremental_streaming_output=args.incremental_streaming_output,
            allow_image_urls=args.allow_image_urls,
            allowed_image_url_networks=tuple(args.allowed_image_url_networks),
            allowed_local_media_paths=tuple(args.allowed_local_media_paths),
            allowed_lora_paths=tuple(args.allowed_lora_paths),
            reasoning_parser=args.reasoning_parser,
            responses_store_path=args.responses_store_path,
            max_stored_responses=args.max_stored_responses,
            max_body_bytes=args.max_body_bytes,
            max_sequences_per_request=args.max_sequences_per_request,
            max_messages=args.max_messages,
            max_tools=args.max_tools,
            max_tool_schema_bytes=args.max_tool_schema_bytes,
            **batch_settings(args),
            launch_args=vars(args),
        )
        engine = _build_engine(args, Engine)
    except (SglrError, ValueError, OSError) as exc:
        listener.close()
        print(f"sglr-server: {exc}", file=sys.stderr)
        return 2
    try:
        app = build_app(engine, settings)
        _serve(app, listener, args, engine.served_model_name)
    finally:
        engine.shutdown()
        listener.close()
    print("sglr-server: shut down", flush=True)
    return 0


def _serve(app: Any, listener: Listener, args: argparse.Namespace, model_name: str) -> None:
    import uvicorn

    from sglr.engine.startup_heap import freeze_startup_heap

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:
                freeze_startup_heap()
                listener.announce(f"serving {model_name}")

        def handle_exit(self, sig: int, frame: Any) -> None:
            # Not recorded in uvicorn's captured signals: uvicorn would re-raise them after
            # serving, killing the process before the engine is shut down and exit status 0.
            state = app.state.sglr
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True  # a second Ctrl-C: stop waiting for requests
            elif not self.should_exit:
                state.shutting_down = True  # health checks fail while requests drain
                # After the grace period, running requests end as aborted (their clients get a
                # complete response) instead of having their connections cut.
                loop = asyncio.get_event_loop()
                loop.call_soon_threadsafe(loop.call_later, args.shutdown_timeout, state.abort_all)
            self.should_exit = True

    from sglr.http.bounded_protocol import BoundedHttpToolsProtocol

    config = uvicorn.Config(
        app,
        http=BoundedHttpToolsProtocol,
        log_level=args.log_level,
        timeout_graceful_shutdown=args.shutdown_timeout + _ABORT_GRACE_S,
        access_log=args.log_level == "debug",
    )
    run_event_loop(Server(config).serve(sockets=[listener.sock]))


if __name__ == "__main__":
    sys.exit(main())
