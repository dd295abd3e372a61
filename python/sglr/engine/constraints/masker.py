"""The allowed-token mask of one sampling step, built for the whole batch at once.

Two things restrict what a request may sample: its output constraint (the FSM's or grammar's
allowed tokens, filled for all constrained rows by one call into Rust per kind with the GIL
released) and
`min_new_tokens` (stop tokens are held back until enough tokens exist). Rows that nothing
restricts allow every token; a batch that nothing restricts gets no mask at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sglr._core import fill_grammar_bitmasks
from sglr.engine.constraints.grammar_state import GrammarConstraintState
from sglr.engine.constraints.masks import fill_token_bitmasks


def build_token_masks(reqs: Sequence[Any], vocab_size: int) -> np.ndarray | None:
    """`[len(reqs), ceil(vocab_size / 32)]` int32 allowed-token bits, or None."""
    constrained = [i for i, req in enumerate(reqs) if req.constraint is not None]
    holding = [i for i, req in enumerate(reqs) if len(req.output_ids) < req.params.min_new_tokens]
    if not constrained and not holding:
        return None
    num_words = (vocab_size + 31) // 32
    mask = np.full((len(reqs), num_words), -1, dtype=np.int32)
    grammars = [i for i in constrained if isinstance(reqs[i].constraint, GrammarConstraintState)]
    fsms = [i for i in constrained if not isinstance(reqs[i].constraint, GrammarConstraintState)]
    if fsms:
        fill_token_bitmasks(
            [reqs[i].constraint.fsm for i in fsms],
            [reqs[i].constraint.state for i in fsms],
            mask,
            fsms,
        )
    if grammars:
        fill_grammar_bitmasks([reqs[i].constraint.state for i in grammars], mask, grammars)
    bits = mask.view(np.uint32)
    for i in holding:
        for token_id in reqs[i].stop_token_ids:
            if token_id < vocab_size:
                bits[i, token_id >> 5] &= np.uint32(~(1 << (token_id & 31)) & 0xFFFFFFFF)
        if not bits[i].any():
            mask[i] = -1  # every allowed token is a stop token: let the constraint win
    return mask
