"""Embeddings of decoder-only models: the pooling a checkpoint declares, and each chunk's part.

A sentence-transformers checkpoint declares it in `modules.json` (a `Pooling` module whose
`config.json` sets `pooling_mode_lasttoken` or `pooling_mode_mean_tokens`, and maybe a
`Normalize` module). Without that layout sglr pools the last token and L2-normalizes, as the
decoder embedding models (e5-mistral, gte-Qwen2) are used.

A prompt may run in several chunks (chunked prefill), so the runner returns per chunk what the
pooling needs in fp32: the sum of the chunk's hidden states and its last one; the engine adds
the sums up and keeps the last (`finish_embedding`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from sglr.errors import EngineConfigError

if TYPE_CHECKING:
    from sglr.model.forward_batch import ForwardBatch

POOLING_MODES = ("last", "mean")


@dataclass(frozen=True)
class Pooling:
    mode: str = "last"  # one of POOLING_MODES
    normalize: bool = True


def read_pooling(model_dir: str | Path) -> Pooling:
    """The checkpoint's declared pooling (sentence-transformers layout), else last + L2."""
    modules_path = Path(model_dir) / "modules.json"
    if not modules_path.is_file():
        return Pooling()
    try:
        modules = json.loads(modules_path.read_text())
        kinds = {str(m.get("type", "")).rsplit(".", 1)[-1]: str(m.get("path", "")) for m in modules}
        pooling_dir = kinds.get("Pooling")
        if pooling_dir is None:
            return Pooling(normalize="Normalize" in kinds)
        config = json.loads((Path(model_dir) / pooling_dir / "config.json").read_text())
    except (OSError, ValueError, AttributeError, TypeError) as e:
        raise EngineConfigError(f"unreadable sentence-transformers pooling declaration: {e}") from e
    if config.get("pooling_mode_lasttoken"):
        mode = "last"
    elif config.get("pooling_mode_mean_tokens"):
        mode = "mean"
    else:
        declared = sorted(k for k, v in config.items() if k.startswith("pooling_mode") and v)
        raise EngineConfigError(f"pooling {declared} is not supported (sglr pools last token or mean)")
    return Pooling(mode, "Normalize" in kinds)


def chunk_parts(
    hidden: torch.Tensor, batch: ForwardBatch
) -> list[tuple[np.ndarray, np.ndarray] | None] | None:
    """Per request of an extend batch: (sum, last) of its chunk's hidden states in fp32 where
    `batch.embed_flags` asks for them, else None; None when no request asks."""
    if not batch.embed_flags:
        return None
    parts: list[tuple[np.ndarray, np.ndarray] | None] = []
    starts, lens = batch.extend_starts_cpu.tolist(), batch.extend_lens_cpu.tolist()
    for start, length, wanted in zip(starts, lens, batch.embed_flags, strict=True):
        if not wanted:
            parts.append(None)
            continue
        rows = hidden[start : start + length].float()
        parts.append((rows.sum(dim=0).cpu().numpy(), rows[-1].cpu().numpy()))
    return parts


def finish_embedding(pooling: Pooling, total: np.ndarray, last: np.ndarray, num_tokens: int) -> list[float]:
    """The prompt's embedding from its accumulated chunk parts."""
    vector = (total / num_tokens if pooling.mode == "mean" else last).astype(np.float64)
    if pooling.normalize:
        # As torch's F.normalize: a zero vector stays zero.
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return vector.astype(np.float32).tolist()
