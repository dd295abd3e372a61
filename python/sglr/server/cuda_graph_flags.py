"""`sglr-server`'s CUDA graph flags (SGLang's names where it has them): `--cuda-graph-max-bs`,
`--disable-cuda-graph` and `--cuda-graph-extend-max-tokens` (graphs for small extend batches,
`model/cuda_graph_extend.py`); `EngineConfig` documents each option. The CPU captures none."""

from __future__ import annotations

import argparse
from typing import Any


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_cuda_graph_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cuda-graph-max-bs",
        type=_count,
        default=None,
        help="decode CUDA graphs up to this batch size (Triton attention on CUDA; default 160; 0: none)",
    )
    parser.add_argument(
        "--disable-cuda-graph", action="store_true", help="capture no CUDA graphs (decode or extend)"
    )
    parser.add_argument(
        "--cuda-graph-extend-max-tokens",
        type=_count,
        default=0,
        help="extend CUDA graphs for batches of up to this many new tokens (Triton attention; default 0: none)",
    )


def cuda_graph_options(args: argparse.Namespace) -> dict[str, Any]:
    if args.disable_cuda_graph:
        return {"cuda_graph_max_bs": 0, "cuda_graph_extend_max_tokens": 0}
    options: dict[str, Any] = {"cuda_graph_extend_max_tokens": args.cuda_graph_extend_max_tokens}
    if args.cuda_graph_max_bs is not None:
        options["cuda_graph_max_bs"] = args.cuda_graph_max_bs
    return options
