"""`OpenAI(model, base_url=..., api_key=...)`: the backend for any OpenAI-compatible endpoint.

Chat models get `s.messages_` (a `gen` must start an assistant turn, unless the program uses
`num_api_spec_tokens`, which generates whole assistant turns); completion models get `s.text_`.
`select` is in `openai_select.py`. Constraints that the OpenAI API lacks (`regex`, `dtype`,
`top_k`, ...) are sent in `extra_body` to servers that understand them (sglr-server, SGLang,
vLLM): by default to every `base_url` that is not api.openai.com.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sglr.errors import BackendError
from sglr.lang.backend.base import BaseBackend
from sglr.lang.backend.openai_select import select_choice
from sglr.lang.chat_template import choose_chat_template
from sglr.lang.choices import ChoicesDecision, ChoicesSamplingMethod
from sglr.lang.gen_params import GenParams

COMPLETION_ONLY_MODELS = ("gpt-3.5-turbo-instruct", "davinci-002", "babbage-002")


@dataclass
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def reset(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0


class OpenAI(BaseBackend):
    def __init__(
        self,
        model_name: str,
        is_chat_model: bool | None = None,
        chat_template: str | None = None,
        is_azure: bool = False,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        tokenizer: Any = None,
        extensions: bool | None = None,
        select_method: str = "auto",
        **client_kwargs: Any,
    ) -> None:
        """`tokenizer` (anything with `encode`/`decode`) enables `select_method="logit_bias"`;
        `extensions` forces sending (or not) the non-OpenAI sampling fields in `extra_body`."""
        super().__init__()
        import openai

        if base_url is not None:
            client_kwargs["base_url"] = base_url
        if api_key is not None:
            client_kwargs["api_key"] = api_key
        client_class = openai.AzureOpenAI if is_azure else openai.OpenAI
        self.client = client_class(**client_kwargs)
        self.model_name = model_name
        self.is_chat_model = (
            model_name not in COMPLETION_ONLY_MODELS if is_chat_model is None else is_chat_model
        )
        self.chat_template = choose_chat_template(model_path=model_name, name=chat_template)
        self.tokenizer = tokenizer
        url = str(self.client.base_url)
        self.extensions = ("api.openai.com" not in url) if extensions is None else extensions
        if select_method not in ("auto", "logprobs", "logit_bias"):
            raise ValueError(f"select_method must be auto, logprobs or logit_bias, got {select_method!r}")
        self.select_method = select_method
        self.token_usage = TokenUsage()
        self.num_api_calls = 0
        self._usage_lock = threading.Lock()
        self._warned: set[str] = set()

    def get_model_name(self) -> str:
        return self.model_name

    # --- requests --------------------------------------------------------------------------------
    def call(self, kind: str, **kwargs: Any) -> Any:
        """One API call (`kind` is "chat" or "completion"), counted in `num_api_calls`/`token_usage`."""
        import openai

        endpoint = self.client.chat.completions if kind == "chat" else self.client.completions
        with self._usage_lock:
            self.num_api_calls += 1
        try:
            response = endpoint.create(model=self.model_name, **kwargs)
        except openai.OpenAIError as exc:
            raise BackendError(f"OpenAI {kind} request failed: {exc}") from exc
        usage = getattr(response, "usage", None)
        if usage is not None:
            self._add_usage(usage)
        return response

    def _add_usage(self, usage: Any) -> None:
        with self._usage_lock:
            self.token_usage.prompt_tokens += usage.prompt_tokens or 0
            self.token_usage.completion_tokens += usage.completion_tokens or 0

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(message, stacklevel=3)

    def sampling_kwargs(self, params: GenParams) -> dict[str, Any]:
        regex, stop = params.regex_and_stop()
        out: dict[str, Any] = {
            "n": params.n,
            "stop": list(stop) or None,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "frequency_penalty": params.frequency_penalty,
            "presence_penalty": params.presence_penalty,
        }
        if self.model_name.startswith(("o1", "o3", "o4")):
            out["max_completion_tokens"] = params.max_new_tokens
        else:
            out["max_tokens"] = params.max_new_tokens
        extra: dict[str, Any] = {}
        if params.tools is not None:
            if not self.is_chat_model:
                raise BackendError(
                    f"gen(tools=...) needs a chat model; {self.model_name!r} is a completion model"
                )
            out["tools"] = params.tools_list
            if params.tool_choice is not None:
                out["tool_choice"] = params.tool_choice_value
        if params.json_schema is not None and self.is_chat_model:
            schema = json.loads(params.json_schema)
            out["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": schema},
            }
        elif params.json_schema is not None:
            extra["json_schema"] = params.json_schema
        if regex is not None:
            extra["regex"] = regex
        if params.ebnf is not None:
            extra["ebnf"] = params.ebnf
        if params.structural_tag is not None:  # sglr-server / SGLang take it as a response format
            tag = {"type": "structural_tag", **json.loads(params.structural_tag)}
            (out if self.is_chat_model else extra)["response_format"] = tag
        if params.top_k != -1:
            extra["top_k"] = params.top_k
        if params.min_p > 0:
            extra["min_p"] = params.min_p
        if params.stop_token_ids:
            extra["stop_token_ids"] = list(params.stop_token_ids)
        if params.ignore_eos:
            extra["ignore_eos"] = True
        if params.min_new_tokens:
            extra["min_tokens"] = params.min_new_tokens
        if params.lora_path is not None:  # SGLang's extension; sglr-server takes it too
            extra["lora_path"] = params.lora_path
        if params.priority is not None:  # likewise
            extra["priority"] = params.priority
        if extra and self.extensions:
            out["extra_body"] = extra
        elif extra:
            self._warn_once(f"the OpenAI API does not support {sorted(extra)}; they are not enforced")
        return out

    def chat_messages(self, s: Any) -> list[dict]:
        """The messages of a chat request: every complete turn; the open assistant turn is the reply."""
        pending = s.text_[s.cur_role_begin_pos :] if s.cur_role_begin_pos is not None else ""
        if s.cur_role != "assistant" or pending.strip():
            raise RuntimeError(
                "This use case is not supported if api speculative execution is off. For OpenAI chat "
                "models, sgl.gen must be right after sgl.assistant. Example of adding api speculative "
                "execution: @function(num_api_spec_tokens=128)."
            )
        return list(s.messages_)

    def generate(self, s: Any, sampling_params: GenParams) -> tuple[str | list[str], dict]:
        _refuse_videos(s)
        kwargs = self.sampling_kwargs(sampling_params)
        if self.is_chat_model:
            response = self.call("chat", messages=self.chat_messages(s), **kwargs)
            texts = [choice.message.content or "" for choice in response.choices]
        else:
            response = self.call("completion", prompt=s.text_, **kwargs)
            texts = [choice.text for choice in sorted(response.choices, key=lambda c: c.index)]
        meta: dict[str, Any] = {
            "id": response.id,
            "finish_reason": {"type": response.choices[0].finish_reason},
        }
        if sampling_params.tools is not None:
            meta["tool_calls"] = [
                [
                    call.model_dump(include={"id", "type", "function"})
                    for call in choice.message.tool_calls or []
                ]
                for choice in response.choices
            ]
            if sampling_params.n == 1:
                meta["tool_calls"] = meta["tool_calls"][0]
        if response.usage is not None:
            meta["prompt_tokens"] = response.usage.prompt_tokens
            meta["completion_tokens"] = response.usage.completion_tokens
        return (texts[0] if sampling_params.n == 1 else texts), meta

    def generate_stream(self, s: Any, sampling_params: GenParams) -> Iterator[tuple[str, dict]]:
        _refuse_videos(s)
        kwargs = self.sampling_kwargs(sampling_params)
        stream_kwargs = {"stream": True, "stream_options": {"include_usage": True}}
        if self.is_chat_model:
            chunks = self.call("chat", messages=self.chat_messages(s), **kwargs, **stream_kwargs)
        else:
            chunks = self.call("completion", prompt=s.text_, **kwargs, **stream_kwargs)
        meta: dict[str, Any] = {}
        calls: dict[int, dict[str, Any]] = {}
        for chunk in chunks:
            if chunk.usage is not None:
                self._add_usage(chunk.usage)
                meta.update(
                    prompt_tokens=chunk.usage.prompt_tokens, completion_tokens=chunk.usage.completion_tokens
                )
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            delta = (choice.delta.content or "") if self.is_chat_model else (choice.text or "")
            if choice.finish_reason is not None:
                meta["finish_reason"] = {"type": choice.finish_reason}
            if self.is_chat_model and choice.delta.tool_calls:
                _add_tool_call_deltas(calls, choice.delta.tool_calls)
            if delta:
                yield delta, dict(meta)
        if sampling_params.tools is not None:
            meta["tool_calls"] = [calls[i] for i in sorted(calls)]
        yield "", dict(meta)

    def select(
        self, s: Any, choices: Sequence[str], temperature: float, choices_method: ChoicesSamplingMethod
    ) -> ChoicesDecision:
        _refuse_videos(s)
        return select_choice(self, s, list(choices), choices_method)

    def shutdown(self) -> None:
        self.client.close()


def _add_tool_call_deltas(calls: dict[int, dict[str, Any]], entries: Sequence[Any]) -> None:
    """Streamed `tool_calls` entries assembled by index: id, type and name come once, the
    arguments in pieces."""
    for entry in entries:
        call = calls.setdefault(
            entry.index, {"id": None, "type": "function", "function": {"name": None, "arguments": ""}}
        )
        if entry.id:
            call["id"] = entry.id
        if entry.type:
            call["type"] = entry.type
        if entry.function is not None:
            if entry.function.name:
                call["function"]["name"] = entry.function.name
            call["function"]["arguments"] += entry.function.arguments or ""


def _refuse_videos(s: Any) -> None:
    """OpenAI's chat API has no video content part: a video would be dropped silently."""
    if getattr(s, "videos_", None):
        raise ValueError(
            "the OpenAI backend cannot send videos; run the program on the engine or RuntimeEndpoint"
        )
