"""The allowed-token mask of one sampling step, built for the whole batch at once.

Two things restrict what a request may sample: its output constraint (the FSM's or grammar's
allowed tokens, filled for all constrained rows by one call into Rust per kind with the GIL
released) and
`min_new_tokens` (stop tokens are held back until enough tokens exist); a request still reasoning
before its constraint (`ReasoningGate`) may take any token but a stop token. Rows that nothing
restricts allow every token; a batch that nothing restricts gets no mask at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sglr._core import fill_grammar_bitmasks
from sglr.engine.constraints.grammar_state import GrammarConstraintState
from sglr.engine.constraints.masks import fill_token_bitmasks
from sglr.engine.constraints.reasoning_gate import ReasoningGate


def _masking_state(constraint: Any) -> Any:
    """The constraint state whose allowed tokens a row takes (None: no constraint yet)."""
    if isinstance(constraint, ReasoningGate):
        return constraint.inner if constraint.undecided else None
    return constraint


def build_token_masks(reqs: Sequence[Any], vocab_size: int) -> np.ndarray | None:
    """`[len(reqs), ceil(vocab_size / 32)]` int32 allowed-token bits, or None."""
    states = [_masking_state(req.constraint) for req in reqs]
    constrained = [i for i, state in enumerate(states) if state is not None]
    gates = [i for i, req in enumerate(reqs) if isinstance(req.constraint, ReasoningGate)]
    holding = [i for i, req in enumerate(reqs) if len(req.output_ids) < req.params.min_new_tokens]
    if not constrained and not holding and not gates:
        return None
    num_words = (vocab_size + 31) // 32
    mask = np.full((len(reqs), num_words), -1, dtype=np.int32)
    grammars = [i for i in constrained if isinstance(states[i], GrammarConstraintState)]
    fsms = [i for i in constrained if not isinstance(states[i], GrammarConstraintState)]
    if fsms:
        fill_token_bitmasks([states[i].fsm for i in fsms], [states[i].state for i in fsms], mask, fsms)
    if grammars:
        fill_grammar_bitmasks([states[i].state for i in grammars], mask, grammars)
    bits = mask.view(np.uint32)
    for i in gates:
        gate = reqs[i].constraint
        if gate.undecided:  # the answer may start now, or the reasoning may open
            bits[i, gate.open_id >> 5] |= np.uint32(1 << (gate.open_id & 31))
        else:  # reasoning: the reply may not end before its answer
            holding.append(i)
    for i in holding:
        for token_id in reqs[i].stop_token_ids:
            if token_id < vocab_size:
                bits[i, token_id >> 5] &= np.uint32(~(1 << (token_id & 31)) & 0xFFFFFFFF)
        if not bits[i].any():
            mask[i] = -1  # every allowed token is a stop token: let the constraint win
    return mask
