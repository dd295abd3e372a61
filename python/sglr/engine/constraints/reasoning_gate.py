"""`ReasoningGate`: a constraint that waits while the model reasons.

A reasoning model writes free text up to a close tag (`</think>`) before its answer; a JSON
schema or tool constraint is about the answer. The gate stands in `req.constraint` until the
reasoning ends, then hands over to the real constraint state (`Constraints.accept` puts
`inner` in its place), so everything downstream of activation sees an ordinary constraint.

Phases: *undecided* (only with an open tag: the first token either opens the reasoning or is
already the answer's first token, so the mask is the answer's plus the open tag), *reasoning*
(every token but a stop token), then the handover. Tags are matched as token ids (the tag's own
tokenization): reasoning models emit their tags as single special tokens.
"""

from __future__ import annotations

from typing import Any


class ReasoningGate:
    def __init__(self, inner: Any, close_ids: list[int], open_ids: list[int] | None) -> None:
        if not close_ids or (open_ids is not None and not open_ids):
            raise ValueError("a reasoning tag must tokenize to at least one token")
        self.inner = inner
        self.close_ids = tuple(close_ids)
        # A multi-token open tag is recognised by its first token (the reply commits to it).
        self.open_id = None if open_ids is None else open_ids[0]
        self.undecided = open_ids is not None
        self._recent: list[int] = []  # the last len(close_ids) reasoning tokens

    @property
    def is_complete(self) -> bool:
        return False  # the answer has not started

    def take(self, token_id: int) -> bool | None:
        """Takes one token: True when the constraint applies from the next token on (the
        caller installs `inner`), False while reasoning goes on, None when the token is one
        the answer's constraint forbids."""
        if self.undecided:
            self.undecided = False
            if token_id == self.open_id:
                return False
            return True if self.inner.advance(token_id) else None
        self._recent = [*self._recent, token_id][-len(self.close_ids) :]
        return tuple(self._recent) == self.close_ids
