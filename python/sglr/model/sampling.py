"""The batched, on-device form of a batch's sampling parameters.

Each request asks with `sglr.sampling_params.SamplingParams` (validated at the API boundary);
`SamplingBatch.build` turns a batch of them (plus each request's generated tokens, for
penalties, and its step count, for seeded sampling) into tensors the sampler applies in a few
batched ops. Semantics: greedy rows take the argmax; top-k, top-p and min-p filter jointly on
the tempered distribution (a token survives if it is within the top k, the tokens ranked above
it hold less than `top_p` of the mass, and its probability is at least `min_p` times the top
token's); repetition penalty divides positive logits of generated tokens (multiplies negative
ones); frequency and presence penalties subtract `count * frequency_penalty` and
`presence_penalty`; a seeded request's draws depend only on (seed, step); `logit_bias` is added
before anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sglr.errors import SamplingError
from sglr.sampling_params import SamplingParams


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
        params: Sequence[SamplingParams],
        vocab_size: int,
        device: torch.device | str,
        output_ids: Sequence[Sequence[int]] | None = None,
        steps: Sequence[int] | None = None,
    ) -> SamplingBatch:
        """`output_ids[i]`: tokens request i generated so far (needed only if some request has a
        penalty; SGLang semantics: the prompt is not penalized). `steps[i]`: how many tokens it
        generated so far (default `len(output_ids[i])`, else 0); seeds the per-request RNG."""
        batch_size = len(params)
        if batch_size == 0:
            raise SamplingError("a sampling batch needs at least one request")
        if output_ids is not None and len(output_ids) != batch_size:
            raise SamplingError("output_ids must have one entry per request")
        if steps is None:
            steps = [len(ids) for ids in output_ids] if output_ids is not None else [0] * batch_size
        elif len(steps) != batch_size:
            raise SamplingError("steps must have one entry per request")
        greedy = [c.is_greedy for c in params]
        top_ks = [min(c.top_k, vocab_size) for c in params]  # "all" (1 << 30) clamps

        def floats(values: Sequence[float], column: bool = False) -> torch.Tensor:
            tensor = torch.tensor(values, dtype=torch.float32, device=device)
            return tensor[:, None] if column else tensor

        penalized = any(c.has_penalty for c in params)
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
                [1.0 if g else c.temperature for g, c in zip(greedy, params, strict=True)], True
            ),
            top_ps=floats([c.top_p for c in params]),
            top_ks=torch.tensor(top_ks, dtype=torch.int64, device=device),
            min_ps=floats([c.min_p for c in params]),
            needs_filter=any(
                not g and (c.top_p < 1.0 or k < vocab_size or c.min_p > 0.0)
                for g, c, k in zip(greedy, params, top_ks, strict=True)
            ),
            output_counts=counts,
            logit_bias=_logit_bias(params, vocab_size, device) if any(c.logit_bias for c in params) else None,
            repetition_penalties=floats([c.repetition_penalty for c in params], True) if penalized else None,
            frequency_penalties=floats([c.frequency_penalty for c in params], True) if penalized else None,
            presence_penalties=floats([c.presence_penalty for c in params], True) if penalized else None,
            seeds=tuple(c.seed for c in params),
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
    params: Sequence[SamplingParams], vocab_size: int, device: torch.device | str
) -> torch.Tensor:
    rows, tokens, values = [], [], []
    for row, config in enumerate(params):
        for token, value in (config.logit_bias or {}).items():
            if not 0 <= int(token) < vocab_size:
                raise SamplingError(
                    f"logit_bias names token {token} outside the vocabulary 0..{vocab_size - 1}"
                )
            rows.append(row)
            tokens.append(int(token))
            values.append(float(value))
    bias = torch.zeros(len(params) * vocab_size, dtype=torch.float32, device=device)
    flat = torch.tensor([r * vocab_size + t for r, t in zip(rows, tokens, strict=True)], dtype=torch.int64)
    bias[flat.to(device)] = torch.tensor(values, dtype=torch.float32).to(device)
    return bias.view(len(params), vocab_size)
