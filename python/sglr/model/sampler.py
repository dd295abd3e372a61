"""Choosing the next token per request: logit bias -> penalties -> allowed-token mask -> greedy or tempered,
filtered (top-k / top-p / min-p) sampling; plus logprobs of the chosen and top tokens.

Sampling draws with the exponential race: `argmax(p_i / E_i)` with `E_i ~ Exp(1)` picks token i
with probability `p_i`. The noise of a seeded request comes from its own generator seeded with
(seed, step), so its tokens do not depend on the rest of the batch.

Logprobs are those of the model itself: `log_softmax` of the raw logits, before penalties,
mask and temperature (what `select` and prompt scoring compare).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sglr.errors import SamplingError
from sglr.model.logprobs import TokenLogprobs, score_tokens
from sglr.model.sampling import SamplingBatch
from sglr.model.token_mask import unpack_token_mask

_SEED_STRIDE = 0x9E3779B97F4A7C15  # odd 64-bit constant: (seed, step) pairs map to distinct seeds


@dataclass(frozen=True)
class SampleOutput:
    """token_ids: `[B]` int64 on the logits' device (feed the next decode step); logprobs: chosen
    tokens' `TokenLogprobs` (None unless asked). On CUDA the host copy of the ids is queued
    behind the sampling kernels, so work queued after them (the next decode step) does not wait
    for the host to read them: `token_ids_cpu` waits for that copy only."""

    token_ids: torch.Tensor
    logprobs: TokenLogprobs | None
    host_ids: torch.Tensor
    copy_done: torch.cuda.Event | None = None

    @property
    def token_ids_cpu(self) -> np.ndarray:
        if self.copy_done is not None:
            self.copy_done.synchronize()
        return self.host_ids.numpy()


def sample(
    logits: torch.Tensor,
    batch: SamplingBatch,
    allowed_mask: torch.Tensor | None = None,
    return_logprobs: bool = False,
    top_logprobs_num: int = 0,
) -> SampleOutput:
    """Picks one token per row of `logits` `[B, V]` (fp32, not modified).

    allowed_mask: int32 words `[B, ceil(V/32)]` (see `sglr.model.token_mask`); a row must allow at
    least one token, else `SamplingError`. Rows of unconstrained requests should be all ones.
    """
    if logits.dim() != 2 or logits.shape[0] != batch.batch_size:
        raise SamplingError(
            f"logits shape {tuple(logits.shape)} does not match batch size {batch.batch_size}"
        )
    processed = process_logits(logits, batch, allowed_mask)
    token_ids = processed.argmax(dim=-1)
    if not batch.all_greedy:
        sampled = _sample_tempered(processed, batch)
        token_ids = torch.where(batch.greedy, token_ids, sampled)
    logprobs = score_tokens(logits, token_ids, top_logprobs_num) if return_logprobs else None
    if not token_ids.is_cuda:
        return SampleOutput(token_ids, logprobs, token_ids)
    host_ids = token_ids.to("cpu", non_blocking=True)  # (into pinned memory)
    copy_done = torch.cuda.Event()
    copy_done.record()
    return SampleOutput(token_ids, logprobs, host_ids, copy_done)


def process_logits(
    logits: torch.Tensor, batch: SamplingBatch, allowed_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """`logits` after logit bias, penalties and the allowed-token mask (a new fp32 tensor): the
    greedy token is its argmax, `tempered_probs` the distribution a sampled one comes from."""
    vocab_size = logits.shape[1]
    processed = logits.float()
    if batch.logit_bias is not None:
        processed = processed + batch.logit_bias
    if batch.output_counts is not None:
        processed = _apply_penalties(processed, batch)
    if allowed_mask is not None:
        if allowed_mask.shape[0] != batch.batch_size:
            raise SamplingError("allowed_mask must have one row per request")
        allowed = unpack_token_mask(allowed_mask.to(logits.device), vocab_size)
        if not bool(allowed.any(dim=1).all()):
            rows = torch.nonzero(~allowed.any(dim=1)).flatten().tolist()
            raise SamplingError(f"allowed-token mask allows no token for batch rows {rows}")
        processed = processed.masked_fill(~allowed, float("-inf"))
    return processed


def _apply_penalties(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    counts = batch.output_counts
    assert counts is not None and batch.repetition_penalties is not None
    seen = counts > 0
    rep = batch.repetition_penalties
    logits = torch.where(seen, torch.where(logits > 0, logits / rep, logits * rep), logits)
    assert batch.frequency_penalties is not None and batch.presence_penalties is not None
    return logits - counts * batch.frequency_penalties - seen.float() * batch.presence_penalties


def _sample_tempered(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    probs = torch.softmax(logits / batch.temperatures, dim=-1)  # [B, V]
    if batch.needs_filter:
        probs = _filter_probs(probs, batch)
    noise = _exponential_noise(batch, probs.shape[1], probs.device)
    return (probs / noise).argmax(dim=-1)


def _filter_probs(probs: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """Zeroes tokens outside top-k, outside the top-p nucleus, or below min_p * max (jointly,
    on the same distribution). The top token always survives."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    ranks = torch.arange(probs.shape[1], device=probs.device)
    keep = ranks[None, :] < batch.top_ks[:, None]
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    keep &= mass_before < batch.top_ps[:, None]
    keep &= sorted_probs >= batch.min_ps[:, None] * sorted_probs[:, :1]
    keep[:, 0] = True
    kept = torch.zeros_like(keep).scatter_(1, order, keep)
    return probs * kept


def _exponential_noise(batch: SamplingBatch, vocab_size: int, device: torch.device) -> torch.Tensor:
    noise = torch.empty((batch.batch_size, vocab_size), dtype=torch.float32, device=device)
    seeded = [i for i, seed in enumerate(batch.seeds) if seed is not None]
    if len(seeded) < batch.batch_size:
        noise.exponential_()
    if seeded:
        generator = torch.Generator(device=device)
        for row in seeded:
            seed = batch.seeds[row]
            assert seed is not None
            generator.manual_seed((seed * _SEED_STRIDE + batch.steps[row]) % 2**63)
            noise[row].exponential_(generator=generator)
    # Exp(1) draws of exactly 0 are possible in float32; they would turn p/0 into inf.
    return noise.clamp_min_(torch.finfo(torch.float32).tiny)
