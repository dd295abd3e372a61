"""`RequestBuilder`: one validated `TokenizedRequest` per sequence spec, before anything is
submitted, and the `OutputAssembler` that will turn its outputs into responses.

Tokenizes the prompt, checks token ids against the vocabulary and the lengths against the
context and the KV cache, resolves `max_new_tokens` and the stop token set; a session request's
prompt continues its session's (`sessions.py`). Every failure is an
`InvalidRequestError` naming the field, raised to the caller (a bad item rejects its batch).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
import time

import numpy as np

from sglr.engine.assembler import OutputAssembler
from sglr.engine.images.prompt import ImagePrompter
from sglr.engine.io import SequenceSpec
from sglr.engine.lora_registry import LoraRegistry
from sglr.engine.priority import PriorityPolicy
from sglr.engine.request import TokenizedRequest
from sglr.engine.sessions import SessionRegistry
from sglr.engine.tokenizer import EngineTokenizer
from sglr.errors import InvalidRequestError, LimitExceededError
from sglr.limits import PROMPT_CHARS_MARGIN


class RequestBuilder:
    def __init__(
        self,
        tokenizer: EngineTokenizer,
        vocab_size: int,
        context_len: int,
        num_kv_slots: int,
        image_prompter: ImagePrompter | None = None,
        loras: LoraRegistry | None = None,
        priorities: PriorityPolicy | None = None,
        sessions: SessionRegistry | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.loras = loras if loras is not None else LoraRegistry((), enabled=False)
        self.image_prompter = image_prompter
        self.priorities = priorities if priorities is not None else PriorityPolicy()
        self.sessions = sessions if sessions is not None else SessionRegistry(abort=lambda rid: None)
        self.vocab_size = vocab_size
        self.context_len = context_len
        self.num_kv_slots = num_kv_slots
        self._uids = itertools.count(1)
        self._uid_lock = threading.Lock()

    @functools.cached_property
    def max_prompt_chars(self) -> int:
        """A text prompt longer than this cannot fit the context, so it is refused untokenized."""
        return self.context_len * self.tokenizer.longest_token_chars * PROMPT_CHARS_MARGIN

    def check_prompt_text(self, text: str, field: str) -> None:
        if len(text) > self.max_prompt_chars:
            raise LimitExceededError(
                f"{field} is {len(text)} characters: longer than any prompt that fits the model's context of "
                f"{self.context_len} tokens ({self.max_prompt_chars} characters at most)",
                param=field,
                limit="prompt text",
            )

    def build(self, spec: SequenceSpec) -> tuple[TokenizedRequest, OutputAssembler]:
        params = spec.params
        lora_id = self.loras.resolve(spec.lora_path)
        priority = self.priorities.resolve(spec.priority)
        if spec.text is not None:
            self.check_prompt_text(spec.text, "text")
        ids = self.tokenizer.encode(spec.text) if spec.text is not None else list(spec.input_ids or ())
        prompt_field = "text" if spec.text is not None else "input_ids"
        session = None
        if spec.session_params is not None:
            if spec.image_data or spec.video_data:
                raise InvalidRequestError("a session request takes no images", param="session_params")
            hf = getattr(self.tokenizer, "hf", None)
            session = self.sessions.compose(spec.session_params, ids, getattr(hf, "bos_token_id", None))
            ids = session.ids
        if not ids:
            raise InvalidRequestError("The prompt is empty after tokenization.", param=prompt_field)
        vocab = self.vocab_size
        # Checked before the int32 conversion, which would overflow on huge ids.
        if min(ids) < 0 or max(ids) >= vocab:
            raise InvalidRequestError(f"input_ids must be in [0, {vocab - 1}].", param="input_ids")
        params.verify_vocab(vocab)
        images: tuple = ()
        prompt_keys = None
        if spec.image_data or spec.video_data:
            if self.image_prompter is None:
                kind = "image" if spec.image_data else "video"
                raise InvalidRequestError(f"this model does not take {kind}s", param=f"{kind}_data")
            placed = self.image_prompter.build(ids, spec.image_data, spec.video_data)
            ids, images, prompt_keys = placed.ids, placed.images, placed.keys
            # The pixels travel to the scheduler, not the sources.
            spec = dataclasses.replace(spec, image_data=(), video_data=())
        prompt_len = len(ids)
        max_new = self._max_new_tokens(prompt_len, params.max_new_tokens, prompt_field)
        stop_ids = set(params.stop_token_ids)
        if not params.ignore_eos:
            stop_ids |= self.tokenizer.eos_token_ids
        with self._uid_lock:
            uid = next(self._uids)
        arrival_time = time.monotonic()
        request = TokenizedRequest(
            uid=uid,
            spec=spec,
            prompt_ids=np.asarray(ids, dtype=np.int32),
            max_new_tokens=max_new,
            stop_token_ids=frozenset(stop_ids),
            arrival_time=arrival_time,
            images=images,
            prompt_keys=prompt_keys,
            lora_id=lora_id,
            priority=priority,
            session_id=None if session is None else session.session_id,
        )
        assembler = OutputAssembler(
            self.tokenizer,
            spec.rid,
            ids,
            params,
            spec.return_logprob,
            spec.top_logprobs_num,
            spec.return_text_in_logprobs,
            arrival_time,
        )
        if session is not None:  # last: a request refused above is no part of its session
            self.sessions.record(session, spec.rid, assembler, max_new)
        return request, assembler

    def _max_new_tokens(self, prompt_len: int, max_new: int | None, prompt_field: str) -> int:
        context_len = self.context_len
        if prompt_len >= context_len:
            raise InvalidRequestError(
                f"The input ({prompt_len} tokens) is longer than the model's context length ({context_len} tokens).",
                param=prompt_field,
            )
        if max_new is None:
            max_new = context_len - prompt_len
        elif prompt_len + max_new > context_len:
            raise InvalidRequestError(
                f"Requested token count exceeds the model's maximum context length of {context_len} tokens. "
                f"You requested a total of {prompt_len + max_new} tokens: {prompt_len} tokens from the input "
                f"messages and {max_new} tokens for the completion. Please reduce the number of tokens in the "
                "input messages or the completion to fit within the limit.",
                param="sampling_params.max_new_tokens",
            )
        if prompt_len + 1 > self.num_kv_slots:
            raise InvalidRequestError(
                f"The input ({prompt_len} tokens) does not fit the KV cache ({self.num_kv_slots} tokens).",
                param=prompt_field,
            )
        return max_new
