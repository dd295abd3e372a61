"""`ExtendItem`: one request's part of an extend pass, and what kind of run it is.

An extend pass runs `fill_ids[start:end]` of each of its requests into their reserved slots.
Four kinds of run, each with its own after-step (`results.py`):

    PROMPT_CHUNK   a chunk of a prompt that continues: its KV is shared, nothing is sampled
    PROMPT_END     the last (or only) chunk of a first prefill: the request starts decoding
                   and samples its first token (or, with max_new_tokens == 0, finishes)
    RESUME         the last chunk of a retracted request's re-prefill: it decodes again
    JUMP_FORWARD   a decoding request's forced tokens (from its constraint), run at once
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sglr.engine.kv import KVPool
from sglr.engine.request import Req


class ExtendKind(enum.Enum):
    PROMPT_CHUNK = "prompt_chunk"
    PROMPT_END = "prompt_end"
    RESUME = "resume"
    JUMP_FORWARD = "jump_forward"

    @property
    def samples(self) -> bool:
        """The run ends where the request's next token is sampled."""
        return self is not ExtendKind.PROMPT_CHUNK


@dataclass
class ExtendItem:
    """Run `fill_ids[start:end]` of `req` into its reserved slots (its KV prefix is
    `kv.slots[:start]`, the new tokens go to `kv.pending_slots()`).

    score_from: prompt position from which to return logprobs (see `prompt_logprobs`)."""

    req: Req
    start: int
    kind: ExtendKind
    score_from: int | None = None

    @property
    def end(self) -> int:
        return self.req.kv.num_reserved

    @property
    def sample(self) -> bool:
        return self.kind.samples


def start_extend(pool: KVPool, req: Req, kind: ExtendKind, score_from: int | None = None) -> ExtendItem:
    """The item of a request whose slots for this pass are reserved."""
    pool.take_row_writes([req.kv])  # dropped: an extend rewrites the whole row
    return ExtendItem(req, req.num_computed, kind, score_from)
