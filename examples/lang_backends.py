"""The command line every language example shares: which backend to run on.

--backend engine [--model-path PATH]                   in-process engine (the default; without a
                                                       path: the embedded SmolLM2-135M-Instruct)
--backend runtime --url http://127.0.0.1:30000        sglr-server or an SGLang server
--backend openai --base-url URL/v1 --model NAME        any OpenAI-compatible endpoint
"""

from __future__ import annotations

import argparse
import atexit
import os
from collections.abc import Callable, Sequence
from typing import Any

import sglr as sgl

# Examples run in one process (the main job, the tests) share one engine per model and device.
_ENGINES: dict[tuple[str | None, str], Any] = {}


def example_args(
    description: str,
    argv: Sequence[str] | None = None,
    add: Callable[[argparse.ArgumentParser], Any] | None = None,
) -> tuple[argparse.Namespace, Any]:
    """Parses the shared flags (plus the example's own, added by `add`) and makes the backend."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=["engine", "runtime", "openai"], default="engine")
    parser.add_argument(
        "--model-path",
        default=None,
        help="engine: a model directory, .gguf file or Hub id (default: the embedded SmolLM2-135M-Instruct)",
    )
    parser.add_argument("--device", default="auto", help="engine: cpu, cuda or auto")
    parser.add_argument("--url", default="http://127.0.0.1:30000", help="native server URL (runtime)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (openai)")
    parser.add_argument("--model", default="gpt-4o-mini", help="model name (openai)")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    parser.add_argument("--num-api-spec-tokens", type=int, default=None, help="API speculative execution")
    if add is not None:
        add(parser)
    args = parser.parse_args(argv)
    return args, make_backend(args)


def make_backend(args: argparse.Namespace) -> Any:
    if args.backend == "runtime":
        return sgl.RuntimeEndpoint(args.url, api_key=args.api_key)
    if args.backend == "openai":
        return sgl.OpenAI(args.model, base_url=args.base_url, api_key=args.api_key or "EMPTY")
    return shared_engine(args.model_path, args.device)


def shared_engine(model_path: str | None = None, device: str = "auto", multiprocess: bool = False) -> Any:
    """The process's engine for `model_path` (built on first use, shut down at exit);
    `multiprocess`: its scheduler and model in a worker process."""
    key = (model_path, device)
    if key not in _ENGINES:
        engine = sgl.Engine(model_path=model_path, device=device, multiprocess=multiprocess)
        atexit.register(engine.shutdown)
        _ENGINES[key] = engine
    return _ENGINES[key]


def close_engines() -> None:
    """Shuts down the engines `shared_engine` built."""
    while _ENGINES:
        _, engine = _ENGINES.popitem()
        engine.shutdown()
