"""`OutputAssembler`: one request's `TokenOutput`s -> SGLang deltas and its final result.

Runs on the caller's side (the thread or event loop reading the results), never on the
scheduler's thread: it detokenizes incrementally, holds back streamed text that might begin a
stop string, trims the final text where the scheduler found one, and builds `meta_info` (ids,
counts, finish reason, logprob entries). Response dicts follow SGLang's native `/generate`:
`text`, `output_ids`, `meta_info`.
"""

from __future__ import annotations

import time
from typing import Any

from sglr.engine.detokenizer import IncrementalDetokenizer
from sglr.engine.finish import FinishReason, FinishStop
from sglr.engine.stop_strings import StopStringMatcher
from sglr.engine.token_output import Logprob, TokenOutput
from sglr.engine.tokenizer import EngineTokenizer
from sglr.sampling_params import SamplingParams

# meta_info lists that a delta holds only the new part of; every other key is a current value.
INCREMENTAL_META_KEYS = ("output_token_logprobs", "output_top_logprobs")


class OutputAssembler:
    def __init__(
        self,
        tokenizer: EngineTokenizer,
        rid: str,
        prompt_ids: list[int],
        params: SamplingParams,
        return_logprob: bool,
        top_logprobs_num: int,
        return_text_in_logprobs: bool,
        arrival_time: float,
    ) -> None:
        self.tokenizer = tokenizer
        self.rid = rid
        self.num_prompt_tokens = len(prompt_ids)
        self.arrival_time = arrival_time
        self.return_logprob = return_logprob
        self.top_logprobs_num = top_logprobs_num
        self.return_text_in_logprobs = return_text_in_logprobs
        self._detokenizer = IncrementalDetokenizer(tokenizer, prompt_ids, params.skip_special_tokens)
        self._stop_matcher = StopStringMatcher(params.stop, params.stop_regex)
        self.text = ""
        self.output_ids: list[int] = []
        self.finish_reason: FinishReason | None = None
        self.cached_tokens = 0
        self.num_retractions = 0
        self.spec_verify_ct: int | None = None  # set once a verify pass has run for the request
        self.spec_accepted_tokens = 0
        self.input_logprobs: list[tuple[float | None, int]] = []
        self.input_top_logprobs: list[list[Logprob] | None] = []
        self.output_logprobs: list[Logprob] = []
        self.output_top_logprobs: list[list[Logprob]] = []
        self._num_sent_chars = 0
        self._num_sent_ids = 0
        self._num_sent_logprobs = 0
        self.embedding_parts: tuple[Any, Any] | None = None  # an embedding request's, at its finish

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def add(self, out: TokenOutput) -> None:
        new_ids = out.new_token_ids
        self.output_ids.extend(new_ids)
        text_ids = new_ids[:-1] if out.last_is_stop_token else new_ids
        if text_ids:
            self.text += self._detokenizer.append(text_ids)
        self.cached_tokens = out.cached_tokens
        self.num_retractions = out.num_retractions
        if out.spec_verify_ct:
            self.spec_verify_ct = out.spec_verify_ct
            self.spec_accepted_tokens = out.spec_accepted_tokens
        self.output_logprobs.extend(out.output_logprobs)
        self.output_top_logprobs.extend(out.output_top_logprobs)
        if out.input_logprobs is not None:
            self.input_logprobs, self.input_top_logprobs = out.input_logprobs
        if out.embedding_parts is not None:
            self.embedding_parts = out.embedding_parts
        if out.finish_reason is not None:
            self.finish_reason = out.finish_reason
            if out.text_end is not None:  # a stop string: the scheduler says where the text ends
                self.text = self.text[: out.text_end]
            elif not isinstance(out.finish_reason, FinishStop) or isinstance(out.finish_reason.matched, int):
                self.text += self._detokenizer.flush()

    def delta(self) -> dict[str, Any] | None:
        """What is new since the last delta (None when nothing is); the last one carries the
        finish reason."""
        finished = self.finished
        visible = self.text if finished else self.text[: self._stop_matcher.safe_len(self.text)]
        new_text = visible[self._num_sent_chars :]
        new_ids = self.output_ids[self._num_sent_ids :]
        if not new_text and not new_ids and not finished:
            return None
        self._num_sent_chars = max(self._num_sent_chars, len(visible))
        self._num_sent_ids = len(self.output_ids)
        meta = self._meta(final=finished, output_logprobs_from=self._num_sent_logprobs)
        self._num_sent_logprobs = len(self.output_logprobs)
        return {"text": new_text, "output_ids": new_ids, "meta_info": meta}

    def result(self) -> dict[str, Any]:
        return {"text": self.text, "output_ids": list(self.output_ids), "meta_info": self._meta(final=True)}

    def _meta(self, final: bool, output_logprobs_from: int = 0) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": self.rid,
            "finish_reason": self.finish_reason if final else None,
            "prompt_tokens": self.num_prompt_tokens,
            "completion_tokens": len(self.output_ids),
            "cached_tokens": self.cached_tokens,
            "num_retractions": self.num_retractions,
        }
        if self.spec_verify_ct is not None:  # speculative decoding ran (SGLang's names)
            meta["spec_verify_ct"] = self.spec_verify_ct
            meta["spec_accepted_tokens"] = self.spec_accepted_tokens
        if final:
            meta["e2e_latency"] = time.monotonic() - self.arrival_time
        if self.return_logprob:
            self._add_logprobs(meta, output_logprobs_from)
        return meta

    def _add_logprobs(self, meta: dict[str, Any], output_from: int) -> None:
        entry = self._entry
        meta["input_token_logprobs"] = [entry(lp, tid) for lp, tid in self.input_logprobs]
        meta["output_token_logprobs"] = [entry(lp, tid) for lp, tid in self.output_logprobs[output_from:]]
        meta["output_token_logprobs_length"] = len(self.output_logprobs)
        values = [lp for lp, _ in self.input_logprobs if lp is not None]
        # Older clients read this instead of averaging the entries themselves.
        meta["normalized_prompt_logprob"] = sum(values) / len(values) if values else 0.0
        if self.top_logprobs_num > 0:
            meta["input_top_logprobs"] = [
                None if top is None else [entry(lp, tid) for lp, tid in top]
                for top in self.input_top_logprobs
            ]
            meta["output_top_logprobs"] = [
                [entry(lp, tid) for lp, tid in top] for top in self.output_top_logprobs[output_from:]
            ]

    def _entry(self, logprob: float | None, token_id: int) -> list[Any]:
        text = (
            self.tokenizer.decode([token_id], skip_special_tokens=False)
            if self.return_text_in_logprobs
            else None
        )
        return [logprob, token_id, text]
