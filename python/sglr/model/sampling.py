"""Per-request sampling settings and their batched, on-device form.

`SamplingConfig` is what one request asks for; `SamplingBatch.build` turns a batch of them (plus
each request's generated tokens, for penalties, and its step count, for seeded sampling) into
tensors the sampler applies in a few batched ops. Field names follow SGLang's sampling params.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from sglr.errors import SamplingError

if TYPE_CHECKING:
    from sglr.sampling_params import SamplingParams

# Below this, a temperature means greedy decoding (as in SGLang and vLLM).
GREEDY_TEMPERATURE = 1e-6


@dataclass(frozen=True)
class SamplingConfig:
    """temperature: 0 (or top_k == 1) means greedy.
    top_p, top_k (-1 or 0 = whole vocabulary), min_p: applied jointly to the tempered
        distribution: a token survives if it is within the top k, the tokens ranked above it
        hold less than `top_p` of the mass, and its probability is at least `min_p` times the
        top token's.
    repetition_penalty (> 0, 1 = off): logits of already generated tokens are divided by it
        (multiplied when negative).
    frequency_penalty, presence_penalty (in [-2, 2]): subtract `count * frequency_penalty` and
        `presence_penalty` once from the logits of generated tokens.
    seed: when set (any int64), the request's draws depend only on (seed, step): the same
        request samples the same tokens whatever else is in the batch.
    logit_bias: token id -> value added to its logit before anything else.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    logit_bias: Mapping[int, float] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise SamplingError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise SamplingError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < -1:
            raise SamplingError(f"top_k must be -1 (off) or >= 0, got {self.top_k}")
        if not 0.0 <= self.min_p <= 1.0:
            raise SamplingError(f"min_p must be in [0, 1], got {self.min_p}")
        if not self.repetition_penalty > 0.0:
            raise SamplingError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        for name in ("frequency_penalty", "presence_penalty"):
            if not -2.0 <= getattr(self, name) <= 2.0:
                raise SamplingError(f"{name} must be in [-2, 2], got {getattr(self, name)}")
        if self.seed is not None and not -(2**63) <= self.seed < 2**63:
            raise SamplingError(f"seed must be a 64-bit integer, got {self.seed}")

    @classmethod
    def from_params(cls, params: SamplingParams) -> SamplingConfig:
        """The sampling part of a request's validated `sglr.sampling_params.SamplingParams`."""
        return cls(
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,  # SamplingParams' "all" (1 << 30) exceeds any vocabulary
            min_p=params.min_p,
            repetition_penalty=params.repetition_penalty,
            frequency_penalty=params.frequency_penalty,
            presence_penalty=params.presence_penalty,
            seed=params.seed,
            logit_bias=dict(params.logit_bias) if params.logit_bias else None,
        )

    @property
    def is_greedy(self) -> bool:
        return self.temperature < GREEDY_TEMPERATURE or self.top_k == 1

    @property
    def has_penalty(self) -> bool:
        return self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0


@dataclass(frozen=True)
class SamplingBatch:
    """Tensors for one sampling step over `batch_size` requests (built by `build`)."""

    batch_size: int
    vocab_size: int
    all_greedy: bool
    greedy: torch.Tensor  # [B] bool
    temperatures: torch.Tensor  # [B, 1] fp32 (1 for greedy rows, never divides by 0)
    top_ps: torch.Tensor  # [B] fp32
    top_ks: torch.Tensor  # [B] int64, vocab_size when off
    min_ps: torch.Tensor  # [B] fp32
    needs_filter: bool  # some row uses top-p/top-k/min-p
    output_counts: torch.Tensor | None  # [B, V] fp32 counts of generated tokens, when penalized
    logit_bias: torch.Tensor | None  # [B, V] fp32, when some request has one
    repetition_penalties: torch.Tensor | None  # [B, 1]
    frequency_penalties: torch.Tensor | None  # [B, 1]
    presence_penalties: torch.Tensor | None  # [B, 1]
    seeds: tuple[int | None, ...]
    steps: tuple[int, ...]

    @classmethod
    def build(
        cls,
        configs: Sequence[SamplingConfig],
        vocab_size: int,
        device: torch.device | str,
        output_ids: Sequence[Sequence[int]] | None = None,
        steps: Sequence[int] | None = None,
    ) -> SamplingBatch:
        """`output_ids[i]`: tokens request i generated so far (needed only if some request has a
        penalty; SGLang semantics: the prompt is not penalized). `steps[i]`: how many tokens it
        generated so far (default `len(output_ids[i])`, else 0); seeds the per-request RNG."""
        batch_size = len(configs)
        if batch_size == 0:
            raise SamplingError("a sampling batch needs at least one request")
        if output_ids is not None and len(output_ids) != batch_size:
            raise SamplingError("output_ids must have one entry per request")
        if steps is None:
            steps = [len(ids) for ids in output_ids] if output_ids is not None else [0] * batch_size
        elif len(steps) != batch_size:
            raise SamplingError("steps must have one entry per request")
        greedy = [c.is_greedy for c in configs]
        top_ks = [vocab_size if c.top_k <= 0 else min(c.top_k, vocab_size) for c in configs]

        def floats(values: Sequence[float], column: bool = False) -> torch.Tensor:
            tensor = torch.tensor(values, dtype=torch.float32, device=device)
            return tensor[:, None] if column else tensor

        penalized = any(c.has_penalty for c in configs)
        counts = None
        if penalized:
            if output_ids is None:
                raise SamplingError("penalties need output_ids (the tokens generated so far)")
            counts = _token_counts(output_ids, vocab_size, device)
        return cls(
            batch_size=batch_size,
            vocab_size=vocab_size,
            all_greedy=all(greedy),
            greedy=torch.tensor(greedy, dtype=torch.bool, device=device),
            temperatures=floats(
                [1.0 if g else c.temperature for g, c in zip(greedy, configs, strict=True)], True
            ),
            top_ps=floats([c.top_p for c in configs]),
            top_ks=torch.tensor(top_ks, dtype=torch.int64, device=device),
            min_ps=floats([c.min_p for c in configs]),
            needs_filter=any(
                not g and (c.top_p < 1.0 or k < vocab_size or c.min_p > 0.0)
                for g, c, k in zip(greedy, configs, top_ks, strict=True)
            ),
            output_counts=counts,
            logit_bias=_logit_bias(configs, vocab_size, device)
            if any(c.logit_bias for c in configs)
            else None,
            repetition_penalties=floats([c.repetition_penalty for c in configs], True) if penalized else None,
            frequency_penalties=floats([c.frequency_penalty for c in configs], True) if penalized else None,
            presence_penalties=floats([c.presence_penalty for c in configs], True) if penalized else None,
            seeds=tuple(c.seed for c in configs),
            steps=tuple(int(s) for s in steps),
        )


def _token_counts(
    output_ids: Sequence[Sequence[int]], vocab_size: int, device: torch.device | str
) -> torch.Tensor:
    """`[B, V]` occurrence counts, built on the device from one transfer of (row, token) pairs."""
    lengths = [len(ids) for ids in output_ids]
    tokens = np.concatenate(
        [np.asarray(ids, dtype=np.int64) for ids in output_ids] or [np.zeros(0, np.int64)]
    )
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise SamplingError("output_ids hold a token outside the vocabulary")
    flat = np.repeat(np.arange(len(output_ids), dtype=np.int64), lengths) * vocab_size + tokens
    counts = torch.zeros(len(output_ids) * vocab_size, dtype=torch.float32, device=device)
    flat_index = torch.from_numpy(flat).to(device)
    counts.index_add_(0, flat_index, torch.ones(flat.size, dtype=torch.float32, device=device))
    return counts.view(len(output_ids), vocab_size)


def _logit_bias(
    configs: Sequence[SamplingConfig], vocab_size: int, device: torch.device | str
) -> torch.Tensor:
    rows, tokens, values = [], [], []
    for row, config in enumerate(configs):
        for token, value in (config.logit_bias or {}).items():
            if not 0 <= int(token) < vocab_size:
                raise SamplingError(
                    f"logit_bias names token {token} outside the vocabulary 0..{vocab_size - 1}"
                )
            rows.append(row)
            tokens.append(int(token))
            values.append(float(value))
    bias = torch.zeros(len(configs) * vocab_size, dtype=torch.float32, device=device)
    flat = torch.tensor([r * vocab_size + t for r, t in zip(rows, tokens, strict=True)], dtype=torch.int64)
    bias[flat.to(device)] = torch.tensor(values, dtype=torch.float32).to(device)
    return bias.view(len(configs), vocab_size)
