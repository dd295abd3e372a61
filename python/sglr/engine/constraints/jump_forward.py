"""Jump-forward: when the FSM leaves only one way forward, the forced bytes are appended at once.

The boundary is re-tokenized, so the tokens are the tokenizer's own: the just-sampled token's
bytes plus the forced bytes are encoded together; that token run is accepted only if the FSM
walks it from the state before the sampled token (the DFA is byte-level, so any tokenization
of the same bytes normally is). Otherwise the forced bytes are encoded alone after the sampled
token, and failing that the step proceeds one token at a time.
"""

from __future__ import annotations

from typing import Any

from sglr.engine.constraints.state import ConstraintState


def jump_forward(
    constraint: ConstraintState, sampled_id: int, vocabulary: Any, hf_tokenizer: Any
) -> list[int] | None:
    """Token ids to append instead of just `sampled_id` (already taken by the FSM), or None when
    nothing is forced. Moves the FSM state to match."""
    forced, _ = constraint.fsm.jump_forward(constraint.state)
    if not forced:
        return None
    sampled_bytes = vocabulary.token_bytes(sampled_id)
    if sampled_bytes is not None:
        joined = _decode_utf8(sampled_bytes + forced)
        if joined is not None:
            tokens = hf_tokenizer.encode(joined, add_special_tokens=False)
            end = constraint.walk(constraint.state_before_last, tokens)
            if tokens and end is not None:
                constraint.state = end
                return tokens
    forced_text = _decode_utf8(forced)
    if forced_text is None:
        return None
    tokens = hf_tokenizer.encode(forced_text, add_special_tokens=False)
    end = constraint.walk(constraint.state, tokens)
    if not tokens or end is None:
        return None
    constraint.state = end
    return [sampled_id, *tokens]


def _decode_utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
