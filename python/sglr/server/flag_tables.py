"""`sglr-server`'s flags that come from tables: one per request limit of `sglr.limits.TABLE`
that has one, the speculative-decoding flags (SGLang's names, one per `speculative_*` engine
option: `EngineConfig` documents each, `engine/speculative/config.py` checks them), the
LoRA flags and the priority-scheduling flags (SGLang's names and meanings)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from sglr.engine.priority import DEFAULT_PREEMPTION_THRESHOLD
from sglr.engine.speculative.config import SPECULATIVE_ALGORITHMS
from sglr.errors import EngineConfigError
from sglr.server.cuda_graph_flags import add_cuda_graph_arguments, cuda_graph_options
from sglr.server.hicache_flags import add_hicache_arguments, hicache_options
from sglr.server.openai.batches.flags import add_batch_arguments
from sglr.server.quantization_flags import add_quantization_arguments, quantization_options
from sglr.server.reasoning.formats import REASONING_FORMATS

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


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """The speculative-decoding flags, the LoRA flags, the priority flags, the reasoning parser,
    the responses store and the batch flags (server settings: launch.py reads them) and
    embedding mode."""
    add_speculative_arguments(parser)
    add_batch_arguments(parser)
    add_lora_arguments(parser)
    add_hicache_arguments(parser)
    add_quantization_arguments(parser)
    add_cuda_graph_arguments(parser)
    parser.add_argument(
        "--reasoning-parser",
        choices=tuple(REASONING_FORMATS),
        default=None,
        help="put chat replies' reasoning in reasoning_content (default: it stays in content)",
    )
    add_priority_arguments(parser)
    overlap = parser.add_mutually_exclusive_group()
    overlap.add_argument(
        "--disable-overlap-schedule",
        dest="overlap_schedule",
        action="store_false",
        default=None,
        help="decode passes wait for the previous pass's tokens to be applied (default on CUDA: overlap)",
    )
    overlap.add_argument(
        "--enable-overlap-schedule",
        dest="overlap_schedule",
        action="store_true",
        help="overlap decode passes on the CPU too (off there by default)",
    )
    parser.add_argument(
        "--responses-store-path",
        default=None,
        help="SQLite file that keeps stored /v1/responses responses (default: in memory)",
    )
    parser.add_argument(
        "--max-stored-responses",
        type=int,
        default=1000,
        help="stored /v1/responses responses kept; the oldest are evicted past it (1000)",
    )
    parser.add_argument(
        "--is-embedding",
        action="store_true",
        help="serve embeddings (/v1/embeddings, /encode) instead of generating",
    )


def table_options(args: argparse.Namespace) -> dict[str, Any]:
    """The engine options of `add_table_arguments`'s flags."""
    return (
        speculative_options(args)
        | lora_options(args)
        | priority_options(args)
        | hicache_options(args)
        | quantization_options(args)
        | cuda_graph_options(args)
        | {"is_embedding": args.is_embedding, "overlap_schedule": args.overlap_schedule}
    )


def add_priority_arguments(parser: argparse.ArgumentParser) -> None:
    """SGLang's priority-scheduling flags (docs/scheduling.md)."""
    add = parser.add_argument
    add(
        "--enable-priority-scheduling",
        action="store_true",
        help="requests' priority orders admission and may retract running requests",
    )
    add(
        "--schedule-low-priority-values-first",
        action="store_true",
        help="smaller priority values go first (default: larger ones)",
    )
    add(
        "--priority-scheduling-preemption-threshold",
        type=int,
        default=DEFAULT_PREEMPTION_THRESHOLD,
        help=f"a waiting request retracts a running one whose priority is lower by more than this ({DEFAULT_PREEMPTION_THRESHOLD})",
    )  # fmt: skip
    add(
        "--abort-on-priority-when-disabled",
        action="store_true",
        help="refuse (400) a request that gives a priority while priority scheduling is off",
    )


def priority_options(args: argparse.Namespace) -> dict[str, Any]:
    names = (
        "enable_priority_scheduling",
        "schedule_low_priority_values_first",
        "priority_scheduling_preemption_threshold",
        "abort_on_priority_when_disabled",
    )
    return {name: getattr(args, name) for name in names}


def add_lora_arguments(parser: argparse.ArgumentParser) -> None:
    """SGLang's LoRA flags (docs/lora.md; the engine checks them), and where runtime loads may
    read adapters from."""
    add = parser.add_argument
    many: dict[str, Any] = {"nargs": "+", "action": "extend", "default": None}
    add(
        "--enable-lora",
        action="store_true",
        default=None,
        help="serve LoRA adapters (on when --lora-paths names any)",
    )
    add(
        "--lora-paths",
        metavar="NAME=PATH",
        **many,
        help='adapters loaded at start: NAME=PATH, a bare PATH (its own name) or SGLang\'s JSON {"lora_name": ..., "lora_path": ...}',
    )
    add(
        "--max-loras-per-batch",
        type=int,
        default=8,
        help="distinct adapters among the requests one batch holds (8)",
    )
    add(
        "--max-loaded-loras",
        type=int,
        default=None,
        help="adapters loaded at once; a load past it is refused (no bound)",
    )
    add("--max-lora-rank", type=int, default=None, help="the largest adapter rank accepted (any)")
    add(
        "--lora-target-modules",
        metavar="MODULE",
        **many,
        help="the projections adapters may change: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, or all (all)",
    )
    add(
        "--lora-backend",
        choices=("auto", "torch", "triton"),
        default="auto",
        help="how adapter deltas run: triton (a segmented kernel) or torch (grouped matmuls); auto: triton on CUDA",
    )
    add(
        "--allowed-lora-path",
        dest="allowed_lora_paths",
        metavar="DIR",
        nargs="+",
        action="extend",
        default=[],
        help="/load_lora_adapter may read adapters from directories inside DIR (repeatable; default: no runtime loads)",
    )  # fmt: skip


def lora_options(args: argparse.Namespace) -> dict[str, Any]:
    """The LoRA flags as engine options."""
    modules = args.lora_target_modules  # "all" is EngineConfig's to read
    return {
        "enable_lora": args.enable_lora,
        "lora_paths": None if args.lora_paths is None else tuple(map(_lora_path_item, args.lora_paths)),
        "max_loras_per_batch": args.max_loras_per_batch,
        "max_loaded_loras": args.max_loaded_loras,
        "max_lora_rank": args.max_lora_rank,
        "lora_target_modules": None if modules is None else tuple(modules),
        "lora_backend": args.lora_backend,
    }


def _lora_path_item(item: str) -> str:
    """`name=path` or a bare path as given; SGLang's JSON form (`pinned` is accepted: adapters
    are never evicted here, each stays loaded until it is unloaded) as `name=path`."""
    if not item.lstrip().startswith("{"):
        return item
    try:
        spec = json.loads(item)
    except ValueError as exc:
        raise EngineConfigError(f"--lora-paths {item!r}: not valid JSON: {exc}") from None
    unknown = sorted(set(spec) - {"lora_name", "lora_path", "pinned"}) if isinstance(spec, dict) else []
    if not isinstance(spec, dict) or unknown:
        raise EngineConfigError(
            f"--lora-paths {item!r}: a JSON item has lora_name, lora_path and pinned only"
        )
    name, path = spec.get("lora_name"), spec.get("lora_path")
    if not isinstance(name, str) or not isinstance(path, str) or not name or not path:
        raise EngineConfigError(f"--lora-paths {item!r}: lora_name and lora_path must be non-empty strings")
    return f"{name}={path}"
