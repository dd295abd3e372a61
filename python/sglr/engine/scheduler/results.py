"""Applying what a forward pass produced: KV commits, prompt scores, sampled tokens, finishes.

After an extend, the pool commits the written KV, and each item is applied by its kind
(`extend.py`): a prompt chunk shares its KV with the prefix cache (later chunks and other
requests reuse it); a prompt's last chunk shares it too and the request starts (or resumes)
decoding with its first sampled token; a jump-forward run takes its next token. After a decode,
every request takes its token. Taking a token means: its logprob, the constraint (which may add
a jump-forward run), the finish checks, then either `finish` or publishing the new tokens.
"""

from __future__ import annotations

from sglr.engine.batch_executor import ExtendOutcome, SampledToken, VerifiedTokens
from sglr.engine.constraints.runtime import Constraints
from sglr.engine.finish import FinishLength, FinishStop
from sglr.engine.kv import KVPool
from sglr.engine.postprocess import OutputProcessor
from sglr.engine.prompt_logprobs import add_embedding_part, record_output_logprob, record_prompt_scores
from sglr.engine.request import Req
from sglr.engine.scheduler.endings import RequestEndings
from sglr.engine.scheduler.extend import ExtendItem, ExtendKind
from sglr.engine.scheduler.running import RunningSet
from sglr.engine.speculative.speculator import Speculator
from sglr.engine.speculative.tree import DraftTree
from sglr.engine.stats import EngineStats
from sglr.errors import EngineInternalError


class StepResults:
    def __init__(
        self,
        pool: KVPool,
        running: RunningSet,
        endings: RequestEndings,
        out: OutputProcessor,
        constraints: Constraints,
        stats: EngineStats,
        speculator: Speculator | None = None,
    ) -> None:
        self._pool = pool
        self._running = running
        self._endings = endings
        self._out = out
        self._constraints = constraints
        self._stats = stats
        self._speculator = speculator

    def after_extend(self, items: list[ExtendItem], outcome: ExtendOutcome) -> None:
        stats = self._stats
        stats.num_extend_passes += 1
        stats.num_extend_tokens += sum(item.end - item.start for item in items)
        stats.num_extend_seqs += len(items)
        for item in items:
            self._pool.commit(item.req.kv)
        for item in items:
            req = item.req
            if item.score_from is not None:
                record_prompt_scores(req, item.score_from, outcome.prompt_scores.get(req.uid))
            if req.uid in outcome.embedding_parts:
                add_embedding_part(req, item.start, outcome.embedding_parts[req.uid])
            match item.kind:
                case ExtendKind.PROMPT_CHUNK:
                    self._share(req)  # later chunks and other requests reuse it
                case ExtendKind.PROMPT_END:
                    req.has_prefilled = True
                    self._start_decoding(req)
                    if req.max_new_tokens == 0:  # prefill (and cache) only
                        req.finish_reason = FinishLength(0)
                        self._endings.finish(req)
                    else:
                        self.accept(req, outcome.sampled[req.uid])
                case ExtendKind.RESUME:
                    self._start_decoding(req)
                    self.accept(req, outcome.sampled[req.uid])
                case ExtendKind.JUMP_FORWARD:
                    self.accept(req, outcome.sampled[req.uid])

    @property
    def context_len(self) -> int:
        """The longest a request may grow (prompt + output): it ends there."""
        return self._out.context_len

    def count_decode_pass(
        self, reqs: list[Req], num_dropped: int | None = None, num_chained: int = 0
    ) -> None:
        """`num_dropped`: an overlapped pass's rows whose request ended before it sampled;
        `num_chained`: its rows fed on the device."""
        stats = self._stats
        # (The totals first: a reader on another thread never sees a pass's parts above them.)
        stats.num_decode_passes += 1
        stats.num_decode_seqs += len(reqs)
        stats.max_decode_batch_size = max(stats.max_decode_batch_size, len(reqs))
        if num_dropped is not None:
            stats.num_overlapped_passes += 1
            stats.num_overlap_dropped_rows += num_dropped
            stats.num_chained_rows += num_chained

    def after_decode(self, reqs: list[Req], sampled: list[SampledToken]) -> None:
        self.count_decode_pass(reqs)
        for req in reqs:
            self._pool.commit(req.kv)
            if self._speculator is not None:
                self._speculator.observe(req, None)
        for req, token in zip(reqs, sampled, strict=True):
            if req.fill_len == req.num_computed:  # else forced tokens come first
                self.accept(req, token)

    def after_verify(
        self, reqs: list[Req], trees: dict[int, DraftTree], verified: list[VerifiedTokens]
    ) -> None:
        """A decode pass that carried drafts: each request keeps the KV of its accepted path
        (its last token, then the accepted drafts) and takes the path's tokens one by one, up to
        the one that finishes it."""
        assert self._speculator is not None
        stats = self._stats
        stats.num_decode_passes += 1
        stats.num_verify_passes += 1
        stats.num_decode_seqs += len(reqs)
        stats.max_decode_batch_size = max(stats.max_decode_batch_size, len(reqs))
        for req, outcome in zip(reqs, verified, strict=True):
            self._pool.commit_path(req.kv, [0] + [1 + node for node in outcome.path.nodes])
            self._speculator.observe(req, trees.get(req.uid), outcome.path.nodes)
        for req, outcome in zip(reqs, verified, strict=True):
            first_computed = req.kv.num_computed - len(outcome.tokens)
            for i, token in enumerate(outcome.tokens):
                num_output = len(req.output_ids)
                self.accept(req, token)
                if req.finish_reason is not None:
                    break
                if len(req.output_ids) > num_output + 1:
                    # Jump-forward appended forced tokens: the drafts' KV after this token no
                    # longer matches the request's tokens; the forced run goes next.
                    self._pool.truncate(req.kv, first_computed + 1 + i)
                    break

    def accept(self, req: Req, token: SampledToken) -> None:
        """Applies one sampled token: logprob, constraint and jump-forward, finish checks, publish."""
        record_output_logprob(req, token.logprob, token.token_id, token.top)
        token_ids = self._constraints.accept(req, token.token_id)
        if token_ids is None:
            self._out.mark_aborted(
                req, EngineInternalError("the sampled token violates the output constraint")
            )
            self._endings.finish(req)
            return
        num_taken = 0
        for token_id in token_ids:
            self._out.append_token(req, token_id)
            num_taken += 1
            if req.finish_reason is not None:
                break
        self._stats.num_generated_tokens += num_taken
        self._stats.num_jump_forward_tokens += len(token_ids) - 1
        if req.finish_reason is None and req.constraint is not None and req.constraint.is_complete:
            # The constraint took EOS: nothing may follow, even with ignore_eos.
            req.finish_reason = FinishStop(token_ids[-1])
        if req.finish_reason is not None:
            if req.kv.is_admitted and req.kv.num_computed >= req.fill_len:
                # It stopped inside an accepted draft run: the KV of the tokens after the stop goes.
                self._pool.truncate(req.kv, req.fill_len - 1)
            self._endings.finish(req)
        else:
            self._out.publish(req)

    def _start_decoding(self, req: Req) -> None:
        """Its prompt has run: the KV goes to the prefix cache and the request decodes."""
        self._share(req)
        self._running.start(req)

    def _share(self, req: Req) -> None:
        self._pool.share(req.kv, req.computed_keys(), req.cache_namespace)
