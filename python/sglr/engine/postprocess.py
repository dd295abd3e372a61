"""After sampling, on the scheduler's thread: append tokens, detect the finish, report outputs.

Finish reasons follow SGLang (`engine/finish.py`). A matched stop token is kept in
`output_ids` but not shown as text; a matched stop string ends the text where it begins (or
ends, with `no_stop_trim`). Text is decoded here only for requests with stop strings; the
caller's side builds the text it shows (`assembler.py`) from the `TokenOutput`s reported here.
"""

from __future__ import annotations

from sglr.engine.finish import FinishAbort, FinishLength, FinishStop
from sglr.engine.output import OutputSink, push_all
from sglr.engine.request import Req
from sglr.engine.token_output import TokenOutput
from sglr.errors import SglrError


class OutputProcessor:
    def __init__(self, context_len: int) -> None:
        self.context_len = context_len
        self._pending: list[tuple[OutputSink, TokenOutput]] = []

    def append_token(self, req: Req, token_id: int) -> None:
        """Adds one sampled (or jump-forward) token and decides whether the request is done."""
        req.output_ids.append(token_id)
        num_output = len(req.output_ids)
        can_stop = num_output >= req.params.min_new_tokens
        if can_stop and token_id in req.stop_token_ids:
            req.finish_reason = FinishStop(token_id)
            req.last_is_stop_token = True
        elif req.stop_text is not None:
            match = req.stop_text.append(token_id, can_stop)
            if match is not None:
                req.finish_reason = FinishStop(match.stop)
                req.text_end = req.stop_text.end_of(match)
        if req.finish_reason is None and num_output >= req.max_new_tokens:
            req.finish_reason = FinishLength(req.max_new_tokens)
        if req.finish_reason is None and req.fill_len >= self.context_len:
            req.finish_reason = FinishLength(num_output)

    def mark_aborted(self, req: Req, error: SglrError) -> None:
        req.finish_reason = FinishAbort(error)

    def publish(self, req: Req) -> None:
        """Reports what is new since the last report to the request's sink (nothing when
        nothing is new and the request goes on)."""
        finished = req.finish_reason is not None
        new_ids = req.output_ids[req.num_sent_ids :]
        if not new_ids and not finished:
            return
        out = TokenOutput(
            uid=req.uid,
            new_token_ids=new_ids,
            completion_tokens=len(req.output_ids),
            cached_tokens=req.cached_tokens or 0,
            num_retractions=req.num_retractions,
            finish_reason=req.finish_reason,
            last_is_stop_token=req.last_is_stop_token and finished,
            text_end=req.text_end,
            spec_verify_ct=req.spec_verify_ct,
            spec_accepted_tokens=req.spec_accepted_tokens,
            embedding_parts=req.embedding_parts if finished else None,
        )
        record = req.logprobs
        if record is not None:
            out.output_logprobs = record.output_token_logprobs[req.num_sent_logprobs :]
            out.output_top_logprobs = record.output_top_logprobs[req.num_sent_logprobs :]
            req.num_sent_logprobs = len(record.output_token_logprobs)
            if not req.sent_input_logprobs and (req.has_prefilled or finished):
                out.input_logprobs = (record.input_token_logprobs, record.input_top_logprobs)
                req.sent_input_logprobs = True
        req.num_sent_ids = len(req.output_ids)
        self._pending.append((req.sink, out))

    def deliver(self) -> None:
        """Hands the outputs published since the last call to their sinks, all at once (the
        loop calls it after every step)."""
        if self._pending:
            pending, self._pending = self._pending, []
            push_all(pending)
