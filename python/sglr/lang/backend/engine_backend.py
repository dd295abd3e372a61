"""`EngineBackend`: runs LM programs on an in-process `Engine` (no HTTP, no server).

    engine = sgl.Engine()                  # the embedded SmolLM2, or Engine(model_path=...)
    sgl.set_default_backend(engine)        # an Engine is wrapped in an EngineBackend

Each prompt state calls `Engine.generate` from its own worker thread, so the calls of forks and
of `run_batch` programs reach the scheduler loop together and run in the same batches. The
fork hint and the `run_batch` prefix hint are prefill-only requests (`max_new_tokens: 0`): the
shared prefix lands in the radix cache before the branches start. `select` scores all choices
with prompt logprobs in one batch request (see `select`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from sglr.engine.finish import FinishAbort
from sglr.errors import InvalidRequestError, RequestAbortedError
from sglr.lang.backend.base import BaseBackend
from sglr.lang.backend.request_params import (
    adapter_fields,
    native_request_fields,
    native_sampling_params,
    run_adapter,
)
from sglr.lang.chat_template import choose_chat_template
from sglr.lang.choices import ChoicesDecision, ChoicesSamplingMethod, decide
from sglr.lang.gen_params import GenParams
from sglr.sampling_params import SamplingParams
from sglr.version import __version__

# `select` is a greedy decision; SGLang rejects a sampling temperature above this.
MAX_SELECT_TEMPERATURE = 1e-5


class EngineBackend(BaseBackend):
    """The backend over an `sglr.engine.engine.Engine`.

    `EngineBackend(engine)` wraps an engine the caller owns (and shuts down);
    `EngineBackend(model_path=..., **engine_options)` builds one that `shutdown()` stops.
    """

    support_concate_and_append = False  # joins re-send text; the prefix is cached anyway

    def __init__(self, engine: Any = None, *, chat_template_name: str | None = None, **engine_options: Any):
        super().__init__()
        if engine is None:
            from sglr.engine.engine import Engine

            engine = Engine(**engine_options)
            self._owns_engine = True
        elif engine_options:
            raise TypeError("pass an Engine or engine options, not both")
        else:
            self._owns_engine = False
        self.engine = engine
        self.chat_template = choose_chat_template(
            model_path=engine.model_path,
            tokenizer_template=engine.tokenizer.chat_template,
            name=chat_template_name,
        )

    # --- generation ------------------------------------------------------------------------------
    def generate(self, s: Any, sampling_params: GenParams) -> tuple[str | list[str], Any]:
        result = self.engine.generate(
            prompt=self._prompt(s),
            sampling_params=engine_sampling_params(sampling_params),
            image_data=self._images(s),
            video_data=self._videos(s),
            **native_request_fields(sampling_params),
        )
        if isinstance(result, list):  # n > 1
            for item in result:
                raise_if_aborted(item["meta_info"])
            return [item["text"] for item in result], [item["meta_info"] for item in result]
        raise_if_aborted(result["meta_info"])
        return result["text"], result["meta_info"]

    def generate_stream(self, s: Any, sampling_params: GenParams) -> Iterator[tuple[str, dict]]:
        """Yields `(delta_text, meta_info)`; meta_info holds every output logprob so far."""
        rid = uuid.uuid4().hex
        chunks = self.engine.generate(
            prompt=self._prompt(s),
            sampling_params=engine_sampling_params(sampling_params),
            image_data=self._images(s),
            video_data=self._videos(s),
            stream=True,
            rid=rid,
            **native_request_fields(sampling_params),
        )
        output_logprobs: list = []
        finished = False
        try:
            for chunk in chunks:
                meta = dict(chunk["meta_info"])
                raise_if_aborted(meta)
                if "output_token_logprobs" in meta:  # the engine streams logprob deltas
                    output_logprobs.extend(meta["output_token_logprobs"])
                    meta["output_token_logprobs"] = list(output_logprobs)
                finished = meta.get("finish_reason") is not None
                yield chunk["text"], meta
        finally:
            if not finished:  # the reader stopped early: do not keep generating for nobody
                self.engine.abort(rid)

    def select(
        self, s: Any, choices: Sequence[str], temperature: float, choices_method: ChoicesSamplingMethod
    ) -> ChoicesDecision:
        """Scores every choice as a continuation of the prompt, in one batch request.

        The prompt and `prompt + choice` are tokenized as the model reads them; the choice's
        tokens are those past their common prefix (so a choice that merges with the prompt's
        last token is scored with that merged token). Each sequence is prefilled with prompt
        logprobs from the last shared token on: entry 0 is that token (logprob null), the
        others are the choice's tokens. The unconditional method also scores the choice's
        tokens alone.
        """
        if temperature > MAX_SELECT_TEMPERATURE:
            raise ValueError("select on the engine is greedy: temperature must be 0")
        images = self._images(s)
        videos = self._videos(s)
        lora_path = run_adapter(s)
        tokenizer = self.engine.tokenizer
        prompt_ids = tokenizer.encode(s.text_)
        sequences = [tokenizer.encode(s.text_ + choice) for choice in choices]
        choice_starts = [common_prefix_len(prompt_ids, ids) for ids in sequences]
        # The prompt's images stand before every choice, each image token grown into its run of
        # tokens (as many as the image's size gives): prefilling the prompt (which the choices
        # then reuse from the cache) tells how many positions they add.
        shift = self._prefill(s.text_, images, videos, lora_path) - len(prompt_ids) if images or videos else 0
        input_logprobs = self._prompt_logprobs(
            sequences, [max(start - 1, 0) + shift for start in choice_starts], images, videos, lora_path
        )
        unconditional = None
        if choices_method.requires_unconditional_logprobs:
            alone = [ids[start:] for ids, start in zip(sequences, choice_starts, strict=True)]
            unconditional = self._prompt_logprobs(alone, [0] * len(alone), lora_path=lora_path)
        output_logprobs: list[list] = [[] for _ in choices]
        return decide(choices, input_logprobs, choices_method, output_logprobs, unconditional)

    def _prompt_logprobs(
        self,
        sequences: list[list[int]],
        starts: list[int],
        images: list[str] | None = None,
        videos: list[list[str]] | None = None,
        lora_path: str | None = None,
    ) -> list[list]:
        """`input_token_logprobs` of each sequence from its start (empty sequences: no entries);
        `images` go with every sequence."""
        todo = [i for i, ids in enumerate(sequences) if ids]
        entries: list[list] = [[] for _ in sequences]
        if not todo:
            return entries
        results = self.engine.generate(
            input_ids=[sequences[i] for i in todo],
            sampling_params={"max_new_tokens": 0},
            return_logprob=True,
            logprob_start_len=[starts[i] for i in todo],
            return_text_in_logprobs=True,
            image_data=[images] * len(todo) if images else None,
            video_data=[videos] * len(todo) if videos else None,
            **adapter_fields(lora_path),
        )
        for i, result in zip(todo, results, strict=True):
            raise_if_aborted(result["meta_info"])
            entries[i] = result["meta_info"]["input_token_logprobs"]
        return entries

    # --- hints -----------------------------------------------------------------------------------
    def _prefill(
        self,
        text: str,
        images: list[str] | None = None,
        videos: list[list[str]] | None = None,
        lora_path: str | None = None,
    ) -> int:
        """Caches the prompt (in `lora_path`'s cache when given); returns its length in tokens
        as the model runs it."""
        if not text:
            return 0
        result = self.engine.generate(
            prompt=text,
            sampling_params={"max_new_tokens": 0},
            image_data=images,
            video_data=videos,
            **adapter_fields(lora_path),
        )
        raise_if_aborted(result["meta_info"])
        return int(result["meta_info"]["prompt_tokens"])

    def cache_prefix(self, prefix_str: str, lora_path: str | None = None) -> None:
        self._prefill(prefix_str, lora_path=lora_path)

    def commit_lazy_operations(self, s: Any) -> None:
        self._prefill(self._prompt(s), self._images(s), self._videos(s), run_adapter(s))

    # --- the rest of the protocol ----------------------------------------------------------------
    def _prompt(self, s: Any) -> str:
        return s.text_

    def _videos(self, s: Any) -> list[list[str]] | None:
        """The prompt's videos (base64 frames each), in order; each at a video token in the text."""
        if not s.videos_:
            return None
        if not self.engine.takes_videos:
            raise ValueError("this engine's model does not take videos; this prompt has some")
        return [frames for _, frames in s.videos_]

    def _images(self, s: Any) -> list[str] | None:
        """The prompt's images (base64), in order; each stands at an image token in the text."""
        if not s.images_:
            return None
        if not self.engine.takes_images:
            raise ValueError("this engine's model does not take images; this prompt has some")
        return [b64 for _, b64 in s.images_]

    def get_model_name(self) -> str:
        return self.engine.served_model_name

    def flush_cache(self) -> bool:
        """Empties the engine's prefix cache; False (nothing done) while requests are in flight."""
        return bool(self.engine.flush_cache())

    def get_server_info(self) -> dict[str, Any]:
        """The engine's configuration and counters, shaped like a server's `/server_info`."""
        return {
            **dataclasses.asdict(self.engine.config),
            "model_path": self.engine.model_path,
            "served_model_name": self.engine.served_model_name,
            "context_length": self.engine.context_len,
            "max_running_requests": self.engine.max_running_requests,
            "version": __version__,
            "internal_states": [self.engine.get_stats()],
        }

    def shutdown(self) -> None:
        if self._owns_engine:
            self.engine.shutdown()

    def __repr__(self) -> str:
        return f"EngineBackend({self.engine.model_path!r})"


def engine_sampling_params(params: GenParams) -> SamplingParams:
    """The engine's `SamplingParams` for a `gen`: the fields a native request would carry, read
    (coerced and validated) as the server reads them, so that a program samples the same
    in process as over HTTP. Invalid values raise `InvalidRequestError`."""
    return SamplingParams.from_dict(native_sampling_params(params))


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def raise_if_aborted(meta_info: dict[str, Any]) -> None:
    """Engine results carry failures as an abort finish reason; the language raises them."""
    finish = meta_info.get("finish_reason")
    if not isinstance(finish, FinishAbort):
        return
    if isinstance(finish.error, InvalidRequestError):
        raise finish.error
    raise RequestAbortedError(f"the engine aborted the request: {finish.error}")
