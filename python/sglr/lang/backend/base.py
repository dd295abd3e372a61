"""The backend protocol: what the interpreter asks of a model.

A backend must implement `generate`, `generate_stream` and `select`; everything else has a
working default (no prefix caching, no server to flush). The argument `s` is the prompt state
(a `StreamExecutor`); backends read, and never write:

- `s.text_`      the prompt text so far (chat template already applied),
- `s.messages_`  the same prompt as OpenAI-style messages (only complete turns),
- `s.images_`    `(source, base64)` pairs of the images in the prompt,
- `s.videos_`    `(source, [base64 frame, ...])` pairs of the videos in the prompt,
- `s.cur_role`   the open role (`"assistant"` while a reply is being generated) or None,
- `s.sid`        a unique id of the prompt state,
- `s.default_sampling_params.lora_path`  the run's LoRA adapter (None: the base model), which
                 a `select` and the cache hints use (each `gen` carries its own).

Calls come from one worker thread per prompt state, so a backend must be thread-safe across
states; calls for one state never overlap.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sglr.lang.chat_template import ChatTemplate, get_chat_template

if TYPE_CHECKING:
    from sglr.lang.choices import ChoicesDecision, ChoicesSamplingMethod
    from sglr.lang.gen_params import GenParams


class BaseBackend:
    """Defaults for the optional parts of the protocol; subclasses override what they support."""

    #: True for APIs that take a message list and no raw text (OpenAI chat models).
    is_chat_model = False
    #: True when `concatenate_and_append` joins forked KV caches without re-prefilling.
    support_concate_and_append = False

    def __init__(self) -> None:
        self.chat_template: ChatTemplate = get_chat_template("default")

    # --- required ------------------------------------------------------------------------------
    def generate(self, s: Any, sampling_params: GenParams) -> tuple[str | list[str], dict]:
        """Generates a continuation of `s.text_` (or `s.messages_`).

        Returns `(text, meta_info)`, or `(list of n texts, meta_info)` when `sampling_params.n`
        > 1. `meta_info` follows the native API (`prompt_tokens`, `completion_tokens`,
        `finish_reason`, logprobs when asked for).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement generate")

    def generate_stream(self, s: Any, sampling_params: GenParams) -> Iterator[tuple[str, dict]]:
        """Like `generate`, as an iterator of `(delta_text, meta_info_so_far)`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement generate_stream")

    def select(
        self,
        s: Any,
        choices: Sequence[str],
        temperature: float,
        choices_method: ChoicesSamplingMethod,
    ) -> ChoicesDecision:
        """Picks one of `choices` as the continuation of `s.text_`.

        Backends with token logprobs score each choice and call `sglr.lang.choices.decide`.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement select")

    # --- optional ------------------------------------------------------------------------------
    def get_model_name(self) -> str:
        raise NotImplementedError(f"{type(self).__name__} does not know its model name")

    def get_chat_template(self) -> ChatTemplate:
        return self.chat_template

    def cache_prefix(self, prefix_str: str, lora_path: str | None = None) -> None:
        """Hint: `prefix_str` starts many prompts soon; prefill it into the prefix cache now
        (the LoRA adapter `lora_path`'s cache when given: the prompts run with it)."""

    def commit_lazy_operations(self, s: Any) -> None:
        """Hint: `s.text_` (with its images) is about to be shared by forks; cache it now."""

    def fill_image(self, s: Any) -> None:
        """Hint: an image was added to `s`; backends may start encoding it."""

    def begin_program(self, s: Any) -> None:
        """A prompt state was created (root or fork child)."""

    def end_program(self, s: Any) -> None:
        """A prompt state will submit nothing more; backends may release per-state resources."""

    def concatenate_and_append(self, src_rids: Sequence[str], dst_rid: str) -> None:
        """Join forked states by concatenating their KV caches (only if support_concate_and_append)."""
        raise NotImplementedError(f"{type(self).__name__} cannot concatenate KV caches")

    def flush_cache(self) -> bool:
        """Drops the backend's prefix cache; returns whether it did."""
        return False

    def get_server_info(self) -> dict | None:
        return None

    def shutdown(self) -> None:
        """Releases connections or processes the backend owns."""
