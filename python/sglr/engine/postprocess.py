"""After sampling: append tokens, detect the finish, and publish deltas and results.

Finish reasons follow SGLang: `{"type": "stop", "matched": <token id | stop string>}`,
`{"type": "length", "length": max_new_tokens}`, `{"type": "abort", "message": ...}`.
A matched stop token is kept in `output_ids` but not decoded into `text`; a matched stop
string is trimmed from `text` (unless `no_stop_trim`). Streaming never shows text that might
turn out to be the start of a stop string.
"""

from __future__ import annotations

import time
from typing import Any

from sglr.engine.finish import FinishAbort, FinishLength, FinishStop
from sglr.engine.output import StreamEvent
from sglr.engine.request import LogprobRecord, Phase, Req
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import SglrError


class OutputProcessor:
    def __init__(self, tokenizer: EngineTokenizer, context_len: int) -> None:
        self.tokenizer = tokenizer
        self.context_len = context_len

    def append_token(self, req: Req, token_id: int) -> None:
        """Adds one sampled (or jump-forward) token and decides whether the request is done."""
        req.output_ids.append(token_id)
        if req.first_token_time is None:
            req.first_token_time = time.monotonic()
        num_output = len(req.output_ids)
        params = req.params
        can_stop = num_output >= params.min_new_tokens
        if can_stop and token_id in req.stop_token_ids:
            req.finish_reason = FinishStop(token_id)
        else:
            new_text = req.detokenizer.append([token_id])
            req.text += new_text
            if can_stop and new_text and not req.stop_matcher.is_empty:
                match = req.stop_matcher.find(req.text, len(new_text))
                if match is not None:
                    req.finish_reason = FinishStop(match.stop)
                    end = match.end if params.no_stop_trim else match.start
                    req.text = req.text[:end]
        if req.finish_reason is None and num_output >= req.max_new_tokens:
            req.finish_reason = FinishLength(req.max_new_tokens)
        if req.finish_reason is None and req.fill_len >= self.context_len:
            req.finish_reason = FinishLength(num_output)

    def mark_aborted(self, req: Req, error: SglrError) -> None:
        req.finish_reason = FinishAbort(error)

    def publish(self, req: Req) -> None:
        """Sends what is new to the request's sink: a delta while streaming, the result at the end."""
        finished = req.finish_reason is not None
        if finished:
            req.phase = Phase.FINISHED
            if not isinstance(req.finish_reason, FinishStop) or isinstance(req.finish_reason.matched, int):
                req.text += req.detokenizer.flush()
        if req.sink.wants_stream:
            visible = req.text if finished else req.text[: req.stop_matcher.safe_len(req.text)]
            delta = self._delta(req, visible)
            if delta is not None or finished:
                req.sink.push(StreamEvent(delta=delta or self._empty_delta(req)))
        if finished:
            req.sink.push(StreamEvent(result=self.result(req)))

    def _delta(self, req: Req, visible: str) -> dict[str, Any] | None:
        new_text = visible[req.num_sent_chars :]
        new_ids = req.output_ids[req.num_sent_ids :]
        if not new_text and not new_ids and req.finish_reason is None:
            return None
        req.num_sent_chars = max(req.num_sent_chars, len(visible))
        req.num_sent_ids = len(req.output_ids)
        meta = self._meta(
            req, final=req.finish_reason is not None, output_logprobs_from=req.num_sent_logprobs
        )
        if req.logprobs is not None:
            req.num_sent_logprobs = len(req.logprobs.output_token_logprobs)
        return {"text": new_text, "output_ids": list(new_ids), "meta_info": meta}

    def _empty_delta(self, req: Req) -> dict[str, Any]:
        return {
            "text": "",
            "output_ids": [],
            "meta_info": self._meta(req, final=True, output_logprobs_from=None),
        }

    def result(self, req: Req) -> dict[str, Any]:
        return {
            "text": req.text,
            "output_ids": list(req.output_ids),
            "meta_info": self._meta(req, final=True),
        }

    def _meta(self, req: Req, final: bool, output_logprobs_from: int | None = 0) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": req.finish_reason if final else None,
            "prompt_tokens": req.prompt_len,
            "completion_tokens": len(req.output_ids),
            "cached_tokens": req.cached_tokens or 0,
            "num_retractions": req.num_retractions,
        }
        if final:
            meta["e2e_latency"] = time.monotonic() - req.arrival_time
        if req.logprobs is not None and output_logprobs_from is not None:
            self._add_logprobs(meta, req, req.logprobs, output_logprobs_from)
        return meta

    def _add_logprobs(self, meta: dict[str, Any], req: Req, record: LogprobRecord, output_from: int) -> None:
        with_text = req.spec.return_text_in_logprobs
        meta["input_token_logprobs"] = [
            self._entry(lp, tid, with_text) for lp, tid in record.input_token_logprobs
        ]
        outputs = record.output_token_logprobs[output_from:]
        meta["output_token_logprobs"] = [self._entry(lp, tid, with_text) for lp, tid in outputs]
        meta["output_token_logprobs_length"] = len(record.output_token_logprobs)
        values = [lp for lp, _ in record.input_token_logprobs if lp is not None]
        # Older clients read this instead of averaging the entries themselves.
        meta["normalized_prompt_logprob"] = sum(values) / len(values) if values else 0.0
        if req.spec.top_logprobs_num > 0:
            meta["input_top_logprobs"] = [
                None if top is None else [self._entry(lp, tid, with_text) for lp, tid in top]
                for top in record.input_top_logprobs
            ]
            meta["output_top_logprobs"] = [
                [self._entry(lp, tid, with_text) for lp, tid in top]
                for top in record.output_top_logprobs[output_from:]
            ]

    def _entry(self, logprob: float | None, token_id: int, with_text: bool) -> list[Any]:
        text = self.tokenizer.decode([token_id], skip_special_tokens=False) if with_text else None
        return [logprob, token_id, text]
