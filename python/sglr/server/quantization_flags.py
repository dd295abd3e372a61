"""`sglr-server`'s quantization flags (SGLang's names): `--quantization fp8` and
`--kv-cache-dtype {auto,fp8_e4m3}`; `EngineConfig` checks the values, docs/quantization.md
documents them."""

from __future__ import annotations

import argparse
from typing import Any

# The values the engine accepts (`RunnerConfig.QUANTIZATIONS`, `KV_CACHE_DTYPES`): literal here so
# that building the parser imports no model code.
QUANTIZATION_CHOICES = ("fp8",)
KV_CACHE_DTYPE_CHOICES = ("auto", "fp8_e4m3")


def add_quantization_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATION_CHOICES,
        default=None,
        help="fp8: linear weights as e4m3 with per-channel scales, activations per token (an FP8 checkpoint loads as stored without it)",
    )
    parser.add_argument(
        "--kv-cache-dtype",
        choices=KV_CACHE_DTYPE_CHOICES,
        default="auto",
        help="fp8_e4m3: K/V stored as e4m3 with per-layer scales (torch attention backend, no CUDA graphs)",
    )


def quantization_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"quantization": args.quantization, "kv_cache_dtype": args.kv_cache_dtype}
