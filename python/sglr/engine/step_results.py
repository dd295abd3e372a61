"""Applying what a forward pass produced: KV commits, prompt scores, sampled tokens, finishes.

After an extend: the pool commits the written KV; prompt chunks share it with the prefix cache
(later chunks and other requests reuse it); a completed prompt joins the decoding set and takes
its first sampled token. After a decode: every request takes its token. Taking a token means:
its logprob, the constraint (which may add a jump-forward run), the finish checks, then either
`finish` or publishing the new text.
"""

from __future__ import annotations

from sglr.engine.batch_executor import ExtendItem, ExtendOutcome, SampledToken
from sglr.engine.constraints.runtime import Constraints
from sglr.engine.finish import FinishLength, FinishStop
from sglr.engine.kv import KVPool
from sglr.engine.lifecycle import RequestTable
from sglr.engine.postprocess import OutputProcessor
from sglr.engine.prompt_logprobs import record_output_logprob, record_prompt_scores
from sglr.engine.request import Phase, Req
from sglr.engine.stats import EngineStats
from sglr.errors import EngineInternalError


class StepResults:
    def __init__(
        self,
        pool: KVPool,
        table: RequestTable,
        out: OutputProcessor,
        constraints: Constraints,
        stats: EngineStats,
    ) -> None:
        self.pool = pool
        self.table = table
        self.out = out
        self.constraints = constraints
        self.stats = stats

    def after_extend(self, items: list[ExtendItem], outcome: ExtendOutcome) -> None:
        stats = self.stats
        stats.num_extend_passes += 1
        stats.num_extend_tokens += sum(item.end - item.start for item in items)
        stats.num_extend_seqs += len(items)
        for item in items:
            self.pool.commit(item.req.kv)
        for item in items:
            req = item.req
            if item.score_from is not None:
                record_prompt_scores(req, item.score_from, outcome.prompt_scores.get(req.uid))
            if not item.sample:
                self._share(req)  # a prompt chunk: later chunks and other requests reuse it
                continue
            first_prefill = not req.has_prefilled
            req.has_prefilled = True
            if first_prefill or req.phase is Phase.PREFILLING:
                self._share(req)
                if req not in self.table.decoding:
                    self.table.decoding.append(req)
                req.phase = Phase.DECODING
            if first_prefill and req.max_new_tokens == 0:  # prefill (and cache) only
                req.finish_reason = FinishLength(0)
                self.table.finish(req)
                continue
            self.accept(req, outcome.sampled[req.uid])

    def after_decode(self, reqs: list[Req], sampled: list[SampledToken]) -> None:
        stats = self.stats
        stats.num_decode_passes += 1
        stats.num_decode_seqs += len(reqs)
        stats.max_decode_batch_size = max(stats.max_decode_batch_size, len(reqs))
        for req in reqs:
            self.pool.commit(req.kv)
        for req, token in zip(reqs, sampled, strict=True):
            self.accept(req, token)

    def accept(self, req: Req, token: SampledToken) -> None:
        """Applies one sampled token: logprob, constraint and jump-forward, finish checks, publish."""
        record_output_logprob(req, token.logprob, token.token_id, token.top)
        token_ids = self.constraints.accept(req, token.token_id)
        if token_ids is None:
            self.out.mark_aborted(
                req, EngineInternalError("the sampled token violates the output constraint")
            )
            self.table.finish(req)
            return
        num_taken = 0
        for token_id in token_ids:
            self.out.append_token(req, token_id)
            num_taken += 1
            if req.finish_reason is not None:
                break
        self.stats.num_generated_tokens += num_taken
        self.stats.num_jump_forward_tokens += len(token_ids) - 1
        if req.finish_reason is None and req.constraint is not None and req.constraint.is_complete:
            # The constraint took EOS: nothing may follow, even with ignore_eos.
            req.finish_reason = FinishStop(token_ids[-1])
        if req.finish_reason is not None:
            self.table.finish(req)
        else:
            self.out.publish(req)

    def _share(self, req: Req) -> None:
        self.pool.share(req.kv, req.computed_keys(), req.spec.namespace)
