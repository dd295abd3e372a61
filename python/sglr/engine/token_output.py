"""`TokenOutput`: what the scheduler reports for one request after a step, as plain data.

The scheduler loop never builds text: it sends token ids, logprobs and the finish reason; the
caller's side (`assembler.OutputAssembler`) detokenizes and builds SGLang's response dicts. The
loop decodes text only for requests with stop strings, to find them, and then says where the
text ends (`text_end`), so both sides agree on the trimmed text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sglr.engine.finish import FinishReason

Logprob = tuple[float, int]  # (logprob, token id)


@dataclass
class TokenOutput:
    """uid: the request. new_token_ids: output tokens since the last report.
    last_is_stop_token: the last new id is the matched stop token (kept in `output_ids`, not
    shown as text). text_end: with a matched stop string, the length of the final text.
    input_logprobs: the prompt's scored positions, sent once (entries, top lists)."""

    uid: int
    new_token_ids: list[int]
    completion_tokens: int
    cached_tokens: int
    num_retractions: int
    finish_reason: FinishReason | None = None
    last_is_stop_token: bool = False
    text_end: int | None = None
    output_logprobs: list[Logprob] = field(default_factory=list)
    output_top_logprobs: list[list[Logprob]] = field(default_factory=list)
    input_logprobs: tuple[list[tuple[float | None, int]], list[list[Logprob] | None]] | None = None
    # Speculative decoding: verify passes the request took part in, drafts of it accepted.
    spec_verify_ct: int = 0
    spec_accepted_tokens: int = 0
    # An embedding request's pooling parts (hidden-state sum, last), with its finish.
    embedding_parts: tuple[Any, Any] | None = None

    def __reduce__(self) -> tuple[type[TokenOutput], tuple[Any, ...]]:
        # Pickled as the constructor's arguments: a worker sends every request's output of a step
        # in one message, and the dataclass default (a dict of fields each) took the front about
        # four times as long to load.
        return (
            TokenOutput,
            (
                self.uid, self.new_token_ids, self.completion_tokens, self.cached_tokens,
                self.num_retractions, self.finish_reason, self.last_is_stop_token, self.text_end,
                self.output_logprobs, self.output_top_logprobs, self.input_logprobs,
                self.spec_verify_ct, self.spec_accepted_tokens, self.embedding_parts,
            ),
        )  # fmt: skip
