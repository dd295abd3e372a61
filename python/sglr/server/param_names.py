"""Naming a bad request field the way the client spelled it.

The engine names the field behind an error in its own layout (`sampling_params.regex`,
`sampling_params.max_new_tokens`, `text` / `input_ids` for the prompt). `/generate` requests use
that layout, so the name passes through; OpenAI requests spell the same fields differently
(`regex`, `response_format`, `max_tokens`, `prompt` or `messages`), and an error's `param` must
point at what the client sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

_SAMPLING_PREFIX = "sampling_params."
_PROMPT_FIELDS = ("text", "input_ids")


@dataclass(frozen=True)
class ParamNames:
    """`sampling`: engine sampling field -> the request field it came from (a field missing here
    kept its name). None: the request used the engine's own layout."""

    sampling: Mapping[str, str] | None = field(default=None)
    # Request field of each image (`image_data[k]` to the engine), for chat content parts.
    images: tuple[str, ...] = ()
    # Request field the prompt came from (`prompt`, `messages`); None: `text` / `input_ids`.
    prompt: str | None = None
    # Request field the LoRA adapter came from (`model` for `"model": "base:adapter"`); None:
    # `lora_path`.
    lora: str | None = None

    def client_name(self, engine_param: str | None) -> str | None:
        if engine_param is not None and self.images and engine_param.startswith("image_data["):
            index = engine_param.removeprefix("image_data[").rstrip("]")
            if index.isdigit() and int(index) < len(self.images):
                return self.images[int(index)]
        if self.prompt is not None and engine_param in _PROMPT_FIELDS:
            return self.prompt
        if self.lora is not None and engine_param == "lora_path":
            return self.lora
        if self.sampling is None or engine_param is None or not engine_param.startswith(_SAMPLING_PREFIX):
            return engine_param
        name = engine_param.removeprefix(_SAMPLING_PREFIX)
        # A part of a field (`structural_tag.structures[0].begin`) follows its field's name.
        head, dot, part = name.partition(".")
        if dot and head in self.sampling:
            return f"{self.sampling[head]}.{part}"
        return self.sampling.get(name, name)


ENGINE_NAMES = ParamNames()
