"""`SpeculativeConfig`: the engine's `speculative_*` options, checked and defaulted.

The names are SGLang's (`--speculative-algorithm`, `--speculative-num-draft-tokens`, ...);
`speculative_max_verify_rows` is sglr's own: how many rows (each request's last token plus its
drafts) one verify pass may hold, the knob that keeps large batches from paying for drafts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglr.errors import EngineConfigError

SPECULATIVE_ALGORITHMS = ("NGRAM", "STANDALONE")
# Accepted by SGLang but not built here yet: refused by name, never silently ignored.
_PLANNED_ALGORITHMS = ("EAGLE", "EAGLE3")

# Rows of a CPU verify pass at most: the fused 4-bit step (SmolLM2, 2 threads, quiet) costs 9.4 ms
# for 1 row, 9.9 for 2, 14.8 for 4, 24.5 for 8 and 51 for 16 (up to 8 rows share one pass over
# the weights); the budget measures the costs and drafts only as far as they pay.
CPU_MAX_VERIFY_ROWS = 8
GPU_MAX_VERIFY_ROWS = 64


@dataclass(frozen=True)
class SpeculativeConfig:
    algorithm: str
    num_draft_tokens: int  # rows per request and pass: its last token + up to this - 1 drafts
    num_steps: int  # deepest draft
    max_verify_rows: int
    ngram_min_match_window_size: int
    ngram_max_match_window_size: int
    ngram_max_bfs_breadth: int
    ngram_capacity: int
    draft_model_path: str | None = None  # STANDALONE
    eagle_topk: int = 1  # STANDALONE: the draft model's top choices per depth (1: a chain)

    @property
    def max_drafts_per_request(self) -> int:
        return self.num_draft_tokens - 1

    @classmethod
    def from_engine(cls, cfg: Any, on_gpu: bool) -> SpeculativeConfig | None:
        """None when `cfg.speculative_algorithm` is unset; `EngineConfigError` on a bad option."""
        algorithm = cfg.speculative_algorithm
        if algorithm is None:
            return None
        name = str(algorithm).upper()
        if name in _PLANNED_ALGORITHMS:
            raise EngineConfigError(
                f"speculative_algorithm {algorithm!r} (a draft model or draft heads) is not available "
                f"yet; choose one of {', '.join(SPECULATIVE_ALGORITHMS)}"
            )
        if name not in SPECULATIVE_ALGORITHMS:
            raise EngineConfigError(
                f"speculative_algorithm must be one of {', '.join(SPECULATIVE_ALGORITHMS)}, got {algorithm!r}"
            )
        if name == "NGRAM" and cfg.speculative_draft_model_path is not None:
            raise EngineConfigError("speculative_draft_model_path needs a draft-model algorithm, not NGRAM")
        if name == "NGRAM" and cfg.speculative_eagle_topk is not None:
            raise EngineConfigError("speculative_eagle_topk needs a draft-model algorithm, not NGRAM")
        if name == "STANDALONE" and not cfg.speculative_draft_model_path:
            raise EngineConfigError(
                "STANDALONE needs speculative_draft_model_path (a smaller model, same tokenizer)"
            )
        num_draft_tokens = cfg.speculative_num_draft_tokens or 8
        if not isinstance(num_draft_tokens, int) or num_draft_tokens < 2:
            raise EngineConfigError(
                f"speculative_num_draft_tokens must be >= 2 (the last token and a draft), got {num_draft_tokens!r}"
            )
        num_steps = cfg.speculative_num_steps or num_draft_tokens - 1
        max_rows = cfg.speculative_max_verify_rows or (GPU_MAX_VERIFY_ROWS if on_gpu else CPU_MAX_VERIFY_ROWS)
        spec = cls(
            algorithm=name,
            num_draft_tokens=num_draft_tokens,
            num_steps=num_steps,
            max_verify_rows=max_rows,
            ngram_min_match_window_size=cfg.speculative_ngram_min_match_window_size,
            ngram_max_match_window_size=cfg.speculative_ngram_max_match_window_size,
            ngram_max_bfs_breadth=cfg.speculative_ngram_max_bfs_breadth,
            ngram_capacity=cfg.speculative_ngram_capacity,
            draft_model_path=cfg.speculative_draft_model_path,
            eagle_topk=cfg.speculative_eagle_topk or 1,
        )
        spec.check()
        return spec

    def check(self) -> None:
        for name in ("num_draft_tokens", "num_steps", "max_verify_rows", "ngram_min_match_window_size",
                     "ngram_max_bfs_breadth", "ngram_capacity", "eagle_topk"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise EngineConfigError(f"speculative_{name} must be a positive integer, got {value!r}")
        if self.ngram_max_match_window_size < self.ngram_min_match_window_size:
            raise EngineConfigError(
                "speculative_ngram_max_match_window_size must be >= speculative_ngram_min_match_window_size"
            )


def num_draft_rows_for(cfg: Any, on_gpu: bool) -> int:
    """Request-table rows the runner keeps for draft tokens (0 without speculation)."""
    spec = SpeculativeConfig.from_engine(cfg, on_gpu)
    return 0 if spec is None else spec.max_verify_rows
