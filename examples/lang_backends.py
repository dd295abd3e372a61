"""The command line every language example shares: which backend to run on.

--backend runtime --url http://127.0.0.1:30000        sglr-server or an SGLang server
--backend openai --base-url URL/v1 --model NAME        any OpenAI-compatible endpoint
--backend engine --model PATH                          in-process engine (not available yet)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

import sglr as sgl


def example_args(
    description: str,
    argv: Sequence[str] | None = None,
    add: Callable[[argparse.ArgumentParser], Any] | None = None,
) -> tuple[argparse.Namespace, Any]:
    """Parses the shared flags (plus the example's own, added by `add`) and makes the backend."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=["runtime", "openai", "engine"], default="runtime")
    parser.add_argument("--url", default="http://127.0.0.1:30000", help="native server URL (runtime)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (openai)")
    parser.add_argument("--model", default="gpt-4o-mini", help="model name (openai) or path (engine)")
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
    raise SystemExit("the in-process engine backend is not available yet: use --backend runtime or openai")
