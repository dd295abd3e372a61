"""`Req`: everything the scheduler loop knows about one sequence in flight.

Token bookkeeping: `fill_ids = prompt + output`. `num_computed` of them have KV in `slots`
(`slots[:num_computed]`); the rest (normally just the last sampled token) still has to run
through the model. Ownership: while running, the request owns `row`, the slots past the
tree-owned prefix, and one lock on `locked_node`.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sglr.engine.detokenizer import IncrementalDetokenizer
from sglr.engine.finish import FinishReason
from sglr.engine.io import SequenceSpec
from sglr.engine.output import OutputSink
from sglr.engine.stop_strings import StopStringMatcher
from sglr.sampling_params import SamplingParams

SLOT_DTYPE = np.int32


class Phase(enum.Enum):
    COMPILING = "compiling"  # waiting for its constraint to compile
    WAITING = "waiting"  # in the scheduler's queue
    PREFILLING = "prefilling"  # admitted; prompt chunks still to run
    DECODING = "decoding"
    FINISHED = "finished"


@dataclass
class LogprobRecord:
    """Logprobs gathered for the response (SGLang's `[logprob, token_id, text]` entries)."""

    input_token_logprobs: list[tuple[float | None, int]] = field(default_factory=list)
    input_top_logprobs: list[list[tuple[float, int]] | None] = field(default_factory=list)
    output_token_logprobs: list[tuple[float, int]] = field(default_factory=list)
    output_top_logprobs: list[list[tuple[float, int]]] = field(default_factory=list)


@dataclass(eq=False)
class Req:
    uid: int
    spec: SequenceSpec
    prompt_ids: np.ndarray
    max_new_tokens: int
    stop_token_ids: frozenset[int]
    sink: OutputSink
    detokenizer: IncrementalDetokenizer
    stop_matcher: StopStringMatcher
    arrival_time: float = field(default_factory=time.monotonic)
    phase: Phase = Phase.WAITING
    output_ids: list[int] = field(default_factory=list)
    row: int | None = None
    slots: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=SLOT_DTYPE))
    num_computed: int = 0
    # Slots `[:num_tree_owned]` belong to the tree (matched or handed over); the rest are ours.
    num_tree_owned: int = 0
    locked_node: int | None = None
    cached_tokens: int | None = None
    num_retractions: int = 0
    constraint: Any = None  # a ConstraintState when the request has a regex / JSON schema
    sampling_config: Any = None  # the sampler's view of `params`, built on first use
    has_prefilled: bool = False  # the prompt ran once (re-admissions after retraction skip
    # prompt-only work: max_new_tokens == 0, prompt logprobs)
    logprobs: LogprobRecord | None = None
    # Text bookkeeping: `text` is what the detokenizer produced (before stop trimming);
    # `num_sent_chars` / `num_sent_ids` are what the sink has seen.
    text: str = ""
    num_sent_chars: int = 0
    num_sent_ids: int = 0
    num_sent_logprobs: int = 0
    finish_reason: FinishReason | None = None
    first_token_time: float | None = None
    error: str | None = None

    @property
    def rid(self) -> str:
        return self.spec.rid

    @property
    def params(self) -> SamplingParams:
        return self.spec.params

    @property
    def prompt_len(self) -> int:
        return int(self.prompt_ids.size)

    @property
    def fill_len(self) -> int:
        return self.prompt_len + len(self.output_ids)

    def fill_ids(self) -> np.ndarray:
        if not self.output_ids:
            return self.prompt_ids
        return np.concatenate([self.prompt_ids, np.asarray(self.output_ids, dtype=SLOT_DTYPE)])

    @property
    def tokens_left(self) -> int:
        """Output tokens the request may still generate."""
        return max(self.max_new_tokens - len(self.output_ids), 0)

    @property
    def num_owned_slots(self) -> int:
        return self.num_computed - self.num_tree_owned

    def ensure_slot_capacity(self, num_tokens: int) -> None:
        if self.slots.size < num_tokens:
            grown = np.zeros(max(num_tokens, 2 * self.slots.size, 64), dtype=SLOT_DTYPE)
            grown[: self.num_computed] = self.slots[: self.num_computed]
            self.slots = grown

    def computed_slots(self) -> np.ndarray:
        return self.slots[: self.num_computed]
