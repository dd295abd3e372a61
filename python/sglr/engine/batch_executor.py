"""`BatchExecutor`: turns the loop's decisions into model steps and sampled tokens.

It builds extend/decode batches from the requests' reserved KV, runs the model, applies token
masks (constraints, and `min_new_tokens` holding back EOS/stop tokens), samples, and collects
logprobs. It owns no KV and changes no request state: the loop applies what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from sglr.engine.kv.row_writes import PendingRowWrites
from sglr.engine.request import Req
from sglr.engine.scheduler.extend import ExtendItem
from sglr.engine.speculative.acceptance import AcceptedPath, accepted_path
from sglr.engine.speculative.tree import DraftTree
from sglr.engine.speculative.verify_batch import layout_verify
from sglr.model.batch_rows import RowWrites
from sglr.model.chained_ids import ChainedIds
from sglr.model.forward_batch import ExtendRequest
from sglr.model.logprobs import TokenLogprobs, score_tokens
from sglr.model.runner import ForwardOutput, ModelRunner
from sglr.model.sampler import SampleOutput, sample
from sglr.model.sampling import SamplingBatch

TokenMasks = Callable[[Sequence[Req], int], "np.ndarray | None"]


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
    # By uid: an embedding request's pooling parts for this chunk (hidden-state sum, last).
    embedding_parts: dict[int, tuple[Any, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifiedTokens:
    """A verify pass's outcome for one request: its accepted path and the tokens to take."""

    path: AcceptedPath
    tokens: list[SampledToken]


@dataclass(frozen=True)
class _NodeFsm:
    """A request's token FSM at a draft node (what the masker reads of a constraint)."""

    fsm: object
    state: int


@dataclass(frozen=True)
class _DraftRow:
    """What the masks and the sampling batch read of a request at a draft node: its tokens as
    if the path up to the node were generated, and its FSM's state there (grammar-constrained
    requests do not draft)."""

    params: object
    spec: object
    output_ids: list[int]
    stop_token_ids: frozenset[int]
    constraint: _NodeFsm | None = None


class BatchExecutor:
    def __init__(self, runner: ModelRunner, token_masks: TokenMasks) -> None:
        self.runner = runner
        self.vocab_size = runner.vocab_size
        self.token_masks = token_masks

    def extend(self, items: Sequence[ExtendItem]) -> ExtendOutcome:
        # Requests of one adapter side by side: each adapter's delta then runs on a slice.
        items = sorted(items, key=lambda item: item.req.lora_id)
        requests = []
        for item in items:
            fill = item.req.fill_ids()
            kv = item.req.kv
            assert kv.row is not None and kv.num_computed == item.start
            requests.append(
                ExtendRequest(
                    row=kv.row,
                    input_ids=fill[item.start : item.end],
                    prefix_slots=kv.slots[: item.start],
                    new_slots=kv.pending_slots(),
                    logprob_start=_logprob_start(item),
                    top_logprobs_num=item.req.spec.top_logprobs_num,
                    images=item.req.images,
                    lora_id=item.req.lora_id,
                    embed=item.req.spec.embed,
                )
            )
        output = self.runner.forward_extend(requests)
        parts = output.embedding_parts or [None] * len(items)
        embeddings = {item.req.uid: part for item, part in zip(items, parts, strict=True) if part is not None}
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
        return ExtendOutcome(sampled, scores, embeddings)

    def decode(self, reqs: Sequence[Req], row_writes: PendingRowWrites | None = None) -> list[SampledToken]:
        """One token per request into its one reserved slot (and the row entries the pool
        switched to other slots since the rows were written)."""
        if any(req.lora_id for req in reqs):  # side by side by adapter, as in `extend`
            order = sorted(range(len(reqs)), key=lambda i: reqs[i].lora_id)
            tokens = self._decode([reqs[i] for i in order], row_writes)
            in_order: list[SampledToken] = [tokens[0]] * len(reqs)
            for position, index in enumerate(order):
                in_order[index] = tokens[position]
            return in_order
        return self._decode(reqs, row_writes)

    def _decode(self, reqs: Sequence[Req], row_writes: PendingRowWrites | None) -> list[SampledToken]:
        # The next token to compute: the last sampled one, or the next forced one of a request
        # whose jump-forward run found no room (it takes one a pass).
        output = self.decode_forward(reqs, [req.token_at(req.num_computed) for req in reqs], row_writes)()
        return self._sample(reqs, output.next_token_logits)

    @property
    def chains_ids(self) -> bool:
        """Whether a decode forward can take ids sampled on the device (`ChainedIds`): one rank."""
        return self.runner.tp is None

    def decode_forward(
        self, reqs: Sequence[Req], input_ids: Sequence[int], row_writes: PendingRowWrites | None,
        chained: ChainedIds | None = None,
    ) -> Callable[[], ForwardOutput]:  # fmt: skip
        """The decode forward alone, `input_ids[i]` into `reqs[i]`'s one reserved slot (or the
        device id `chained` names), as a call that reads no request state: the overlapped pass
        (`scheduler/overlap.py`) runs it on the forward thread while the loop changes the
        requests, and samples later."""
        args = (
            np.array([req.kv.row for req in reqs], dtype=np.int64),
            np.array(input_ids, dtype=np.int64),
            np.array([req.num_computed + 1 for req in reqs], dtype=np.int64),
            np.concatenate([req.kv.pending_slots() for req in reqs]),
            None if row_writes is None else RowWrites(row_writes.rows, row_writes.cols, row_writes.slots),
        )
        lora_ids = [req.lora_id for req in reqs]
        return lambda: self.runner.forward_decode(*args, lora_ids=lora_ids, chained=chained)

    def sample_rows(self, reqs: Sequence[Req], logits: torch.Tensor, rows: Sequence[int]) -> DeferredTokens:
        """Samples `reqs[i]`'s token from row `rows[i]` of `logits` (masks read now); the host
        learns the tokens at `DeferredTokens.resolve`."""
        if not reqs:  # (every row dropped or waiting for its forced run)
            return DeferredTokens([], None)
        if len(rows) != logits.shape[0] or list(rows) != list(range(len(rows))):
            logits = logits.index_select(0, torch.tensor(list(rows), device=logits.device))
        return DeferredTokens(list(reqs), self._launch_sample(reqs, logits))

    def verify(
        self, reqs: Sequence[Req], trees: Sequence[DraftTree | None], row_writes: PendingRowWrites | None
    ) -> list[VerifiedTokens]:
        """One pass over every request's last token and its draft tree (`verify_batch.py`), then
        each request's longest accepted path (`acceptance.py`), its tokens with their logprobs."""
        layout = layout_verify(reqs, trees, self.runner.draft_rows, row_writes)
        lora_ids = [
            req.lora_id for req, tree in zip(reqs, trees, strict=True) for _ in range(1 + len(tree or ()))
        ]
        output = self.runner.forward_decode(
            layout.req_rows, layout.input_ids, layout.seq_lens, layout.out_slots,
            layout.row_writes, layout.row_copies, lora_ids,
        )  # fmt: skip
        logits = output.next_token_logits
        views: list[Req | _DraftRow] = []
        for req, tree in zip(reqs, trees, strict=True):
            views.append(req)
            for node in range(0 if tree is None else len(tree)):
                assert tree is not None
                fsm = None if tree.fsm_states is None else _NodeFsm(req.constraint.fsm, tree.fsm_states[node])
                path_ids = req.output_ids + tree.path_tokens(node)
                views.append(_DraftRow(req.params, req.spec, path_ids, req.stop_token_ids, fsm))
        # Every row's token drawn as plain decoding draws it (a seeded request's noise depends on
        # its seed and the row's step only): a draft is accepted when it is that token.
        row_tokens = self._sample(views, logits)  # type: ignore[arg-type]
        results = []
        for i, tree in enumerate(trees):
            first = layout.first_rows[i]
            num_rows = 1 + (0 if tree is None else len(tree))
            path = accepted_path(tree, [t.token_id for t in row_tokens[first : first + num_rows]])
            results.append(VerifiedTokens(path, [row_tokens[first + row] for row in path.rows]))
        return results

    def _sample(self, reqs: Sequence[Req], logits: torch.Tensor) -> list[SampledToken]:
        return _tokens(reqs, self._launch_sample(reqs, logits))

    def _launch_sample(self, reqs: Sequence[Req], logits: torch.Tensor) -> SampleOutput:
        params = [req.params for req in reqs]
        penalized = any(p.has_penalty for p in params)
        batch = SamplingBatch.build(
            params,
            logits.shape[1],
            logits.device,
            output_ids=[req.output_ids for req in reqs] if penalized else None,
            steps=[len(req.output_ids) for req in reqs],
        )
        mask = self.token_masks(reqs, logits.shape[1])
        want_logprobs = any(req.spec.return_logprob for req in reqs)
        top_k = max((req.spec.top_logprobs_num for req in reqs if req.spec.return_logprob), default=0)
        return sample(
            logits,
            batch,
            allowed_mask=None if mask is None else torch.from_numpy(mask),
            return_logprobs=want_logprobs,
            top_logprobs_num=top_k,
        )


class DeferredTokens:
    """Tokens sampled for `reqs`, row i request i's: `device_ids` feed the next decode step
    before `resolve` waits for their host copy (once)."""

    def __init__(self, reqs: list[Req], result: SampleOutput | None) -> None:
        self._reqs = reqs
        self._result = result
        self._tokens: list[SampledToken] | None = None if result is not None else []

    @property
    def device_ids(self) -> torch.Tensor:
        assert self._result is not None
        return self._result.token_ids

    def resolve(self) -> list[SampledToken]:
        if self._tokens is None:
            assert self._result is not None
            self._tokens = _tokens(self._reqs, self._result)
        return self._tokens


def _tokens(reqs: Sequence[Req], result: SampleOutput) -> list[SampledToken]:
    token_ids = result.token_ids_cpu
    tokens = []
    for i, req in enumerate(reqs):
        token = SampledToken(int(token_ids[i]))
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


def _logprob_start(item: ExtendItem) -> int | None:
    """First position of this run whose logits score the next prompt token (None: none do)."""
    if item.score_from is None or item.score_from > item.end - 1:
        return None
    return max(item.score_from, item.start)


def _entries(scored: TokenLogprobs) -> tuple[list[tuple[float, int]], list[list[tuple[float, int]]]]:
    entries = [(float(lp), int(tid)) for lp, tid in zip(scored.logprobs, scored.token_ids, strict=True)]
    tops = [
        [(float(lp), int(tid)) for lp, tid in zip(row_lp, row_ids, strict=True)]
        for row_lp, row_ids in zip(scored.top_logprobs, scored.top_ids, strict=True)
    ]
    return entries, tops
