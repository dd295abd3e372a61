"""`BatchExecutor`: turns the loop's decisions into model steps and sampled tokens.

It builds extend/decode batches, runs the model, applies token masks (constraints, and
`min_new_tokens` holding back EOS/stop tokens), samples, and collects logprobs. It owns no
KV and changes no request state: the loop applies what it returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from sglr.engine.constraints import fill_token_bitmasks
from sglr.engine.request import Req
from sglr.model.forward_batch import ExtendRequest
from sglr.model.logprobs import TokenLogprobs, score_tokens
from sglr.model.runner import ModelRunner
from sglr.model.sampler import sample
from sglr.model.sampling import SamplingBatch, SamplingConfig


@dataclass
class ExtendItem:
    """Run `fill_ids[start : start + len(new_slots)]` of `req` (its KV prefix is `slots[:start]`).

    sample: take the next token from the last position (the prompt, or a jump-forward run, is
    complete). score_from: prompt position from which to return logprobs (see `_prompt_logprob_start`).
    """

    req: Req
    start: int
    new_slots: np.ndarray
    sample: bool
    score_from: int | None = None

    @property
    def end(self) -> int:
        return self.start + int(self.new_slots.size)


@dataclass
class SampledToken:
    token_id: int
    logprob: float | None = None
    top: list[tuple[float, int]] = field(default_factory=list)


@dataclass
class ExtendOutcome:
    sampled: dict[int, SampledToken]  # by request uid
    # By uid: logprob entries (logprob, token id) and top lists for scored prompt tokens.
    prompt_scores: dict[int, tuple[list[tuple[float, int]], list[list[tuple[float, int]]]]]


class BatchExecutor:
    def __init__(self, runner: ModelRunner, constraint_masks: ConstraintMasker | None = None) -> None:
        self.runner = runner
        self.vocab_size = runner.vocab_size
        self.masker = constraint_masks or ConstraintMasker()

    def extend(self, items: Sequence[ExtendItem]) -> ExtendOutcome:
        requests = []
        for item in items:
            fill = item.req.fill_ids()
            requests.append(
                ExtendRequest(
                    row=item.req.row,
                    input_ids=fill[item.start : item.end],
                    prefix_slots=item.req.slots[: item.start],
                    new_slots=item.new_slots,
                    logprob_start=_logprob_start(item),
                    top_logprobs_num=item.req.spec.top_logprobs_num,
                )
            )
        output = self.runner.forward(self.runner.extend_batch(requests))
        scores: dict[int, tuple[list[tuple[float, int]], list[list[tuple[float, int]]]]] = {}
        for i, item in enumerate(items):
            scored = output.prompt_logprobs[i]
            entries, tops = _entries(scored) if scored is not None else ([], [])
            if item.score_from is not None and not item.sample and item.end - 1 >= item.score_from:
                # A chunk boundary: the chunk's last logits score the next chunk's first token.
                next_id = int(item.req.fill_ids()[item.end])
                tail = score_tokens(
                    output.next_token_logits[i : i + 1],
                    torch.tensor([next_id], device=output.next_token_logits.device),
                    item.req.spec.top_logprobs_num,
                )
                more, more_tops = _entries(tail)
                entries += more
                tops += more_tops
            if item.score_from is not None:
                scores[item.req.uid] = (entries, tops)
        sampling_rows = [i for i, item in enumerate(items) if item.sample]
        sampled = {}
        if sampling_rows:
            rows = torch.tensor(sampling_rows, device=output.next_token_logits.device)
            reqs = [items[i].req for i in sampling_rows]
            tokens = self._sample(reqs, output.next_token_logits.index_select(0, rows))
            sampled = {req.uid: token for req, token in zip(reqs, tokens, strict=True)}
        return ExtendOutcome(sampled, scores)

    def decode(self, reqs: Sequence[Req], new_slots: np.ndarray) -> list[SampledToken]:
        batch = self.runner.decode_batch(
            [req.row for req in reqs],
            [req.output_ids[-1] for req in reqs],
            [req.num_computed + 1 for req in reqs],
            new_slots,
        )
        output = self.runner.forward(batch)
        return self._sample(reqs, output.next_token_logits)

    def _sample(self, reqs: Sequence[Req], logits: torch.Tensor) -> list[SampledToken]:
        configs = [_sampling_config(req) for req in reqs]
        penalized = any(c.has_penalty for c in configs)
        batch = SamplingBatch.build(
            configs,
            logits.shape[1],
            logits.device,
            output_ids=[req.output_ids for req in reqs] if penalized else None,
            steps=[len(req.output_ids) for req in reqs],
        )
        mask = self.masker.build(reqs, logits.shape[1])
        want_logprobs = any(req.spec.return_logprob for req in reqs)
        top_k = max((req.spec.top_logprobs_num for req in reqs if req.spec.return_logprob), default=0)
        result = sample(
            logits,
            batch,
            allowed_mask=None if mask is None else torch.from_numpy(mask),
            return_logprobs=want_logprobs,
            top_logprobs_num=top_k,
        )
        tokens = []
        for i, req in enumerate(reqs):
            token = SampledToken(int(result.token_ids_cpu[i]))
            if req.spec.return_logprob and result.logprobs is not None:
                token.logprob = float(result.logprobs.logprobs[i])
                k = req.spec.top_logprobs_num
                token.top = [
                    (float(lp), int(tid))
                    for lp, tid in zip(
                        result.logprobs.top_logprobs[i][:k], result.logprobs.top_ids[i][:k], strict=True
                    )
                ]
            tokens.append(token)
        return tokens


class ConstraintMasker:
    """Builds the allowed-token mask of a sampling step, or None when nothing is masked."""

    def build(self, reqs: Sequence[Req], vocab_size: int) -> np.ndarray | None:
        constrained = [i for i, req in enumerate(reqs) if req.constraint is not None]
        holding = [i for i, req in enumerate(reqs) if len(req.output_ids) < req.params.min_new_tokens]
        if not constrained and not holding:
            return None
        num_words = (vocab_size + 31) // 32
        mask = np.full((len(reqs), num_words), -1, dtype=np.int32)
        if constrained:
            self.fill_constraints([reqs[i] for i in constrained], mask, constrained)
        bits = mask.view(np.uint32)
        for i in holding:
            for token_id in reqs[i].stop_token_ids:
                if token_id < vocab_size:
                    bits[i, token_id >> 5] &= np.uint32(~(1 << (token_id & 31)) & 0xFFFFFFFF)
            if not bits[i].any():
                mask[i] = -1  # every allowed token is a stop token: let the constraint win
        return mask

    def fill_constraints(self, reqs: Sequence[Req], mask: np.ndarray, rows: Sequence[int]) -> None:
        # One call into Rust for the whole batch (GIL released while it fills).
        fill_token_bitmasks(
            [req.constraint.fsm for req in reqs], [req.constraint.state for req in reqs], mask, list(rows)
        )


def _logprob_start(item: ExtendItem) -> int | None:
    """First position of this run whose logits score the next prompt token (None: none do)."""
    if item.score_from is None or item.score_from > item.end - 1:
        return None
    return max(item.score_from, item.start)


def _sampling_config(req: Req) -> SamplingConfig:
    if req.sampling_config is None:
        req.sampling_config = SamplingConfig.from_params(req.params)
    return req.sampling_config


def _entries(scored: TokenLogprobs) -> tuple[list[tuple[float, int]], list[list[tuple[float, int]]]]:
    entries = [(float(lp), int(tid)) for lp, tid in zip(scored.logprobs, scored.token_ids, strict=True)]
    tops = [
        [(float(lp), int(tid)) for lp, tid in zip(row_lp, row_ids, strict=True)]
        for row_lp, row_ids in zip(scored.top_logprobs, scored.top_ids, strict=True)
    ]
    return entries, tops
