"""Logprob bookkeeping: which prompt positions a request wants scored, and recording the scores.

A request with `return_logprob` and `logprob_start_len >= 0` wants the logprob of every prompt
token from that position on. Those positions must be computed (their logits exist only while the
prompt runs), so its first admission may not take them from the prefix cache.
"""

from __future__ import annotations

from typing import Any

from sglr.engine.request import Req


def logprob_start(req: Req) -> int | None:
    """First prompt position to score, while the prompt has not run yet; else None. It is also
    how much of the prompt the scheduler may take from the cache (None: all of it)."""
    spec = req.spec
    if not spec.return_logprob or spec.logprob_start_len < 0 or req.has_prefilled:
        return None
    return min(spec.logprob_start_len, req.prompt_len - 1)


def record_prompt_scores(req: Req, score_from: int, scores: Any) -> None:
    """Appends one extend run's prompt scores (`(entries, tops)` or None) to the request's record;
    the first position has no logprob (nothing precedes it), as SGLang reports."""
    record = req.logprobs
    assert record is not None
    if not record.input_token_logprobs:
        record.input_token_logprobs.append((None, int(req.prompt_ids[score_from])))
        record.input_top_logprobs.append(None)
    if scores is not None:
        entries, tops = scores
        record.input_token_logprobs.extend(entries)
        record.input_top_logprobs.extend(tops)


def prefix_limit(req: Req) -> int | None:
    """How much of the prompt the scheduler may take from the prefix cache (None: all of it). An
    embedding request takes none: cached positions have no hidden states to pool."""
    return 0 if req.spec.embed else logprob_start(req)


def add_embedding_part(req: Req, start: int, part: tuple[Any, Any]) -> None:
    """Adds one chunk's pooling parts; a run from position 0 starts over (a prompt computed
    again after a retraction must not count twice)."""
    total, last = part
    if start == 0 or req.embedding_parts is None:
        req.embedding_parts = (total, last)
    else:
        req.embedding_parts = (req.embedding_parts[0] + total, last)


def record_output_logprob(
    req: Req, logprob: float | None, token_id: int, top: list[tuple[float, int]]
) -> None:
    if req.logprobs is not None and logprob is not None:
        req.logprobs.output_token_logprobs.append((logprob, token_id))
        req.logprobs.output_top_logprobs.append(top)
