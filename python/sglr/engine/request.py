"""`Req`: everything the scheduler loop knows about one sequence in flight.

Token bookkeeping: `fill_ids = prompt + output`. `kv.num_computed` of them have KV (in
`kv.slots`); the rest (normally just the last sampled token) still has to run through the
model. The prefix cache indexes `fill_keys()`, the same ids except at image positions, which
carry ids derived from the image's content (`engine/images/cache_keys.py`), so equal images
share KV and different ones never do. The request's hold on KV memory (`kv`: its row, slots and prefix lock) is a record that
only the engine's `KVPool` changes.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sglr.engine.detokenizer import Decoder
from sglr.engine.finish import FinishReason
from sglr.engine.io import SequenceSpec
from sglr.engine.kv import RequestKV
from sglr.engine.output import OutputSink
from sglr.engine.stop_strings import StopText
from sglr.model.image_input import ImageInput
from sglr.sampling_params import SamplingParams


class Phase(enum.Enum):
    """Where a request stands; only the scheduler's `RequestTable` changes it."""

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


@dataclass(frozen=True)
class TokenizedRequest:
    """A validated, tokenized sequence: what the caller's side hands the scheduler."""

    uid: int
    spec: SequenceSpec
    prompt_ids: np.ndarray
    max_new_tokens: int
    stop_token_ids: frozenset[int]
    arrival_time: float
    images: tuple[ImageInput, ...] = ()
    # The prompt as the prefix cache sees it (None: `prompt_ids` itself, a text-only prompt).
    prompt_keys: np.ndarray | None = None
    lora_id: int = 0  # the LoRA adapter it runs with (0: the base model)
    priority: int = 0  # its scheduling priority (`engine/priority.py`; 0 while that is off)
    session_id: str | None = None  # the open session whose KV it pins when it ends


@dataclass(eq=False)
class Req:
    uid: int
    spec: SequenceSpec
    prompt_ids: np.ndarray
    max_new_tokens: int
    stop_token_ids: frozenset[int]
    sink: OutputSink
    images: tuple[ImageInput, ...] = ()
    prompt_keys: np.ndarray | None = None  # see `TokenizedRequest.prompt_keys`
    lora_id: int = 0  # see `TokenizedRequest.lora_id`
    priority: int = 0  # see `TokenizedRequest.priority`
    session_id: str | None = None  # see `TokenizedRequest.session_id`
    # Only for requests with stop strings: the text, decoded to find them.
    stop_text: StopText | None = None
    arrival_time: float = field(default_factory=time.monotonic)
    phase: Phase = Phase.WAITING
    output_ids: list[int] = field(default_factory=list)
    kv: RequestKV = field(default_factory=RequestKV)
    cached_tokens: int | None = None
    num_retractions: int = 0
    # Speculative decoding: verify passes this request took part in, and its accepted drafts.
    spec_verify_ct: int = 0
    spec_accepted_tokens: int = 0
    constraint: Any = None  # a ConstraintState when the request has a regex / JSON schema
    has_prefilled: bool = False  # the prompt ran once (re-admissions after retraction skip
    # prompt-only work: max_new_tokens == 0, prompt logprobs)
    logprobs: LogprobRecord | None = None
    finish_reason: FinishReason | None = None
    last_is_stop_token: bool = False  # the last output id is the matched stop token
    text_end: int | None = None  # the final text's length, when a stop string ended it
    # What the sink has been sent so far.
    num_sent_ids: int = 0
    num_sent_logprobs: int = 0
    sent_input_logprobs: bool = False
    # An embedding request's pooling parts so far (`model/pooling.py`): hidden-state sum, last.
    embedding_parts: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def from_tokenized(cls, t: TokenizedRequest, sink: OutputSink, tokenizer: Decoder) -> Req:
        params = t.spec.params
        stop_text = None
        if params.stop or params.stop_regex:
            stop_text = StopText(tokenizer, t.prompt_ids.tolist(), params)
        return cls(
            uid=t.uid,
            spec=t.spec,
            prompt_ids=t.prompt_ids,
            max_new_tokens=t.max_new_tokens,
            stop_token_ids=t.stop_token_ids,
            sink=sink,
            images=t.images,
            prompt_keys=t.prompt_keys,
            lora_id=t.lora_id,
            priority=t.priority,
            session_id=t.session_id,
            stop_text=stop_text,
            arrival_time=t.arrival_time,
            logprobs=LogprobRecord() if t.spec.return_logprob else None,
        )

    @property
    def rid(self) -> str:
        return self.spec.rid

    @property
    def cache_namespace(self) -> str | None:
        """The prefix cache's key space: the request's namespace, and its adapter's (a prefix
        computed with one adapter's weights is another's or the base's nowhere)."""
        if self.lora_id == 0:
            return self.spec.namespace
        return f"{self.spec.namespace or ''}\x00lora:{self.lora_id}"

    @property
    def params(self) -> SamplingParams:
        return self.spec.params

    @property
    def prompt_len(self) -> int:
        return int(self.prompt_ids.size)

    @property
    def fill_len(self) -> int:
        return self.prompt_len + len(self.output_ids)

    def token_at(self, position: int) -> int:
        """The token at `position` of `fill_ids` (prompt, then output)."""
        if position < self.prompt_len:
            return int(self.prompt_ids[position])
        return self.output_ids[position - self.prompt_len]

    def fill_ids(self) -> np.ndarray:
        return self._with_output(self.prompt_ids)

    def fill_keys(self) -> np.ndarray:
        """`fill_ids` as the prefix cache indexes them (image positions keyed by content)."""
        return self._with_output(self.prompt_ids if self.prompt_keys is None else self.prompt_keys)

    def _with_output(self, prompt: np.ndarray) -> np.ndarray:
        if not self.output_ids:
            return prompt
        return np.concatenate([prompt, np.asarray(self.output_ids, dtype=np.int32)])

    def computed_keys(self) -> np.ndarray:
        """`fill_keys()[:num_computed]`: the keys of the KV the request holds."""
        return self.fill_keys()[: self.kv.num_computed]

    @property
    def tokens_left(self) -> int:
        """Output tokens the request may still generate."""
        return max(self.max_new_tokens - len(self.output_ids), 0)

    @property
    def num_computed(self) -> int:
        """Tokens of `fill_ids` whose KV is written."""
        return self.kv.num_computed
