"""`GrammarConstraintState`: one request's position in a grammar (EBNF or recursive JSON schema).

Unlike an FSM state (an integer into a shared table), a grammar position is a parse chart owned
by this request (`sglr._core.GrammarState`); the compiled grammar is shared.
"""

from __future__ import annotations

from typing import Any


class GrammarConstraintState:
    def __init__(self, grammar: Any) -> None:
        self.grammar = grammar
        self.state = grammar.start()

    @property
    def is_complete(self) -> bool:
        """EOS was taken: only EOS could follow."""
        return bool(self.state.is_finished)

    def advance(self, token_id: int) -> bool:
        """Takes one token; False (and no change) when the grammar forbids it."""
        return bool(self.state.try_advance(token_id))

    def jump_forward(self, sampled_id: int, hf_tokenizer: Any) -> list[int] | None:
        """Token ids to append instead of just `sampled_id` (already taken) when the grammar
        forces the next bytes, or None. The forced text is tokenized on its own and kept only
        if the grammar takes those tokens."""
        forced = self.state.forced_bytes()
        if not forced:
            return None
        try:
            text = forced.decode("utf-8")
        except UnicodeDecodeError:
            return None
        tokens = hf_tokenizer.encode(text, add_special_tokens=False)
        probe = self.state.copy()
        if not tokens or not all(probe.try_advance(t) for t in tokens):
            return None
        self.state = probe
        return [sampled_id, *tokens]
