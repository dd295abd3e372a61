"""`ConstraintState`: one request's position in its compiled FSM."""

from __future__ import annotations

from typing import Any


class ConstraintState:
    def __init__(self, fsm: Any) -> None:
        self.fsm = fsm
        self.state: int = fsm.start_state  # a property of the TokenFsm binding
        self.state_before_last: int = self.state

    @property
    def is_complete(self) -> bool:
        """The FSM has taken EOS: only EOS could follow."""
        return self.fsm.is_terminal(self.state)

    def advance(self, token_id: int) -> bool:
        """Takes one token; False (and no change) when the constraint forbids it."""
        nxt = self.fsm.try_advance(self.state, token_id)
        if nxt is None:
            return False
        self.state_before_last, self.state = self.state, nxt
        return True

    def walk(self, state: int, token_ids: list[int]) -> int | None:
        """The state after `token_ids` from `state`, or None if one of them is forbidden."""
        for token_id in token_ids:
            nxt = self.fsm.try_advance(state, token_id)
            if nxt is None:
                return None
            state = nxt
        return state
