"""`sglr-server`'s flags that come from tables: one per request limit of `sglr.limits.TABLE`
that has one, and the speculative-decoding flags (SGLang's names, one per `speculative_*` engine
option: `EngineConfig` documents each, `engine/speculative/config.py` checks them)."""

from __future__ import annotations

import argparse
from typing import Any

from sglr.engine.speculative.config import SPECULATIVE_ALGORITHMS

# (option, type, help)
_FLAGS: tuple[tuple[str, type, str], ...] = (
    (
        "speculative_algorithm",
        str,
        f"draft and verify several tokens per pass: {', '.join(SPECULATIVE_ALGORITHMS)}",
    ),
    ("speculative_num_draft_tokens", int, "rows per request in a verify pass, its last token included (8)"),
    ("speculative_num_steps", int, "deepest draft (num-draft-tokens - 1)"),
    ("speculative_eagle_topk", int, "STANDALONE: the draft model's top choices per depth (1: a chain)"),
    ("speculative_draft_model_path", str, "STANDALONE: a smaller model with the same tokenizer"),
    ("speculative_max_verify_rows", int, "rows of one verify pass over the batch (8 on CPU, 64 on GPU)"),
    ("speculative_ngram_min_match_window_size", int, "last tokens that must match an earlier occurrence (1)"),
    ("speculative_ngram_max_match_window_size", int, "last tokens compared with an earlier occurrence (12)"),
    ("speculative_ngram_max_bfs_breadth", int, "earlier occurrences merged into one draft tree (4)"),
    ("speculative_ngram_capacity", int, "occurrences remembered per token and request (256)"),
)


def add_speculative_arguments(parser: argparse.ArgumentParser) -> None:
    for option, kind, text in _FLAGS:
        parser.add_argument("--" + option.replace("_", "-"), dest=option, type=kind, default=None, help=text)


def speculative_options(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given, as engine options (the engine's defaults stand for the others)."""
    return {option: getattr(args, option) for option, _, _ in _FLAGS if getattr(args, option) is not None}


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag for each limit of `sglr.limits.TABLE` that has one (docs/server.md lists them)."""
    from sglr import limits

    for limit in limits.TABLE:
        if limit.flag is not None and limit.flag.startswith("--max-"):
            parser.add_argument(
                limit.flag,
                type=int,
                default=limit.default,
                help=f"{limit.what} (default: {limits.describe(limit)})",
            )
