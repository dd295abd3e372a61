"""`POST /v1/chat/completions`: OpenAI's chat API over the engine.

Messages are rendered with the chat template; `max_completion_tokens` (or the older
`max_tokens`) bounds the reply, by default up to the context length; `logprobs` and
`top_logprobs`; `response_format` json_schema / json_object and the `regex` extension constrain
the reply. With `--reasoning-parser`, a reply's reasoning goes in `reasoning_content` (see
`sglr.server.reasoning`); tool calls are parsed in the content after it. Streams send a role
chunk per choice, reasoning and content deltas, a finish chunk per choice, then (with
`stream_options.include_usage`) a usage chunk, and `data: [DONE]`. When reasoning is separated,
`usage` counts its tokens (`reasoning_tokens`, `completion_tokens_details.reasoning_tokens`; see
`sglr.server.reasoning.tokens`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.errors import InvalidRequestError
from sglr.http.errors import ApiError
from sglr.http.request import get_bool, get_dict, get_int, read_json_object
from sglr.limits import MAX_LOGPROBS
from sglr.server.generation import start_generation
from sglr.server.generation_response import json_response, stream_response
from sglr.server.image_sources import RequestImages
from sglr.server.openai.messages import ImagePart, normalize_messages
from sglr.server.openai.protocol import (
    OpenAIChunks,
    OpenAIRequest,
    chat_logprobs,
    finish_reason,
    matched_stop,
)
from sglr.server.openai.sampling import SAMPLING_FIELDS
from sglr.server.reasoning.chat import ChatReasoning, ReasoningDeltas
from sglr.server.reasoning.tokens import ReasoningTokens, with_reasoning_tokens
from sglr.server.state import ServerState
from sglr.server.tools.chat import ChatTools
from sglr.server.tools.stream import ToolCallDeltas

_FIELDS = SAMPLING_FIELDS | {
    "messages", "max_completion_tokens", "logprobs", "top_logprobs", "tools", "tool_choice",
    "parallel_tool_calls", "functions", "function_call", "chat_template_kwargs", "reasoning_effort",
    "modalities", "audio", "prediction", "separate_reasoning", "stream_reasoning",
}  # fmt: skip
# `apply_chat_template`'s parameters (Hugging Face's and sglr's), refused in chat_template_kwargs.
_RENDERER_ARGUMENTS = frozenset({
    "messages", "conversation", "tools", "chat_template", "add_generation_prompt",
    "continue_final_message", "tokenize", "padding", "truncation", "max_length", "return_tensors",
    "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs",
})  # fmt: skip
_UNSUPPORTED = {
    "functions": "the legacy functions field is not supported; use tools",
    "function_call": "the legacy function_call field is not supported; use tool_choice",
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
}


class ChatRequest(OpenAIRequest):
    """A validated chat request, rendered to prompt token ids."""

    def __init__(self, state: ServerState, body: dict[str, Any]) -> None:
        super().__init__(state, body, _FIELDS, _UNSUPPORTED, "the chat completions request")
        settings = state.settings
        self.tools = ChatTools(
            body, state.engine.tokenizer.chat_template, settings.max_tools, settings.max_tool_schema_bytes
        )
        modalities = body.get("modalities")
        if modalities is not None and modalities != ["text"]:
            raise ApiError.bad_request("only the text modality is supported", "modalities")
        self.images: list[ImagePart] = []
        self.image_sources = RequestImages(state.image_sources)
        messages = normalize_messages(
            body.get("messages"),
            self.images if state.engine.takes_images else None,
            self.image_sources,
            settings.max_messages,
        )
        messages, tool_kwargs = self.tools.render_inputs(messages)
        client_kwargs = _template_kwargs(body)
        self.reasoning = ChatReasoning(settings.reasoning_format, body, client_kwargs)
        self._tokenizer = state.engine.tokenizer
        template_kwargs = {**client_kwargs, **tool_kwargs}
        try:
            text = state.engine.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, **template_kwargs
            )
            state.engine.check_prompt_text(text, "messages")
            self.prompt_ids = state.engine.tokenizer.encode(text, add_special_tokens=False)
        except InvalidRequestError as exc:  # the tokenizer names its own `text`: the messages here
            if exc.param == "messages":
                raise
            raise ApiError.bad_request(exc.message, "messages") from exc
        if not self.prompt_ids:
            raise ApiError.bad_request("the messages render to an empty prompt", "messages")
        max_tokens_field = "max_completion_tokens"
        max_tokens = get_int(body, max_tokens_field, None, 1)
        if max_tokens is None and body.get("max_tokens") is not None:
            max_tokens_field = "max_tokens"
            max_tokens = get_int(body, max_tokens_field, None, 1)
        self.logprobs = bool(get_bool(body, "logprobs", False))
        self.top_logprobs = get_int(body, "top_logprobs", 0, 0, MAX_LOGPROBS)
        if self.top_logprobs and not self.logprobs:
            raise ApiError.bad_request("top_logprobs requires logprobs to be true", "top_logprobs")
        self._read_sampling(body, max_tokens, max_tokens_field, "messages")
        self.tools.constrain(self.params)
        if self.tools.constraint is not None or _formats_the_answer(body):
            # The regex / ebnf extensions rule the whole reply, reasoning included.
            self.reasoning.gate_constraint(self.params)
        if self.tools.active:
            self.tools.keep_special_tokens(self.params, state.engine.tokenizer.is_special_token_text)
        if self.images:  # engine errors about image k name its content part
            self.names = dataclasses.replace(self.names, images=tuple(image.where for image in self.images))
        self._number_choices(body, num_prompts=1, id_prefix="chatcmpl")

    def engine_kwargs(self) -> dict[str, Any]:
        return {
            "input_ids": [self.prompt_ids],
            "sampling_params": self.params,
            "rid": self.ids.request_ids(self.layout.num_sequences),
            "return_logprob": self.logprobs,
            "top_logprobs_num": self.top_logprobs,
            "return_text_in_logprobs": True,
            "image_data": [[self.image_sources.resolved(i.url, i.where) for i in self.images]]
            if self.images
            else None,
            "lora_path": self.lora_path,
            "priority": self.priority,
        }

    def header(self, kind: str) -> dict[str, Any]:
        return {**super().header(kind), "system_fingerprint": None}

    def reasoning_tokens(self) -> ReasoningTokens | None:
        """A reply's reasoning token counter (None when reasoning is not separated)."""
        fmt = self.reasoning.format
        if fmt is None:
            return None
        return ReasoningTokens(fmt, lambda ids: self._tokenizer.decode(ids, skip_special_tokens=False))

    def logprobs_of(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        tops = meta.get("output_top_logprobs") if self.top_logprobs else None
        return chat_logprobs(meta.get("output_token_logprobs", []), tops, self.top_logprobs)


async def chat_completions(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    return await answer_chat(state, request, body)


async def answer_chat(state: ServerState, request: Request, body: dict[str, Any]) -> Response:
    """The route after the body is read (a batch's lines come here too, `openai.batches`)."""
    req = ChatRequest(state, body)
    await req.image_sources.read()
    gen = await start_generation(state, req.engine_kwargs(), req.names)
    if req.stream:
        return await stream_response(request, gen, ChatChunks(req))
    return await json_response(request, gen, lambda results: chat_response(req, results))


def _template_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """`chat_template_kwargs`: variables for the template. The renderer's own arguments are
    refused: they would change what rendering returns (`tokenize`, `return_dict`), replace the
    template, or clash with what the server passes (the messages, `tools`, the generation prompt)."""
    kwargs = get_dict(body, "chat_template_kwargs") or {}
    for key in kwargs:
        if key in _RENDERER_ARGUMENTS:
            raise ApiError.bad_request(
                f"chat_template_kwargs.{key} is not a template variable (it is an argument of the renderer)",
                f"chat_template_kwargs.{key}",
            )
    return kwargs


def chat_response(req: ChatRequest, results: list[dict[str, Any]]) -> dict[str, Any]:
    called: set[int] = set()

    def content(sequence: int, result: dict[str, Any]) -> dict[str, Any]:
        reasoning, text = req.reasoning.split(result["text"])
        message, has_calls = req.tools.message(text)
        message["reasoning_content"] = reasoning
        if has_calls:
            called.add(req.layout.choice_of(sequence))
        return {"message": message, "logprobs": req.logprobs_of(result["meta_info"])}

    response = req.whole_response("chat.completion", results, content)
    for choice in response["choices"]:
        if choice["index"] in called and choice["finish_reason"] == "stop":
            choice["finish_reason"] = "tool_calls"
    if req.reasoning.active:
        num_reasoning_tokens = 0
        for result in results:
            counter = req.reasoning_tokens()
            assert counter is not None
            counter.feed(result["text"], result.get("output_ids", ()))
            num_reasoning_tokens += counter.count()
        response["usage"] = with_reasoning_tokens(response["usage"], num_reasoning_tokens)
    return response


class ChatChunks(OpenAIChunks):
    """A role chunk per choice first, then content deltas, then a finish chunk per choice."""

    def __init__(self, req: ChatRequest) -> None:
        super().__init__(req, "chat.completion.chunk")
        self.chat = req
        self.tool_deltas = [ToolCallDeltas(req.tools) for _ in range(req.layout.num_sequences)]
        self.reasoning_deltas = [ReasoningDeltas(req.reasoning) for _ in range(req.layout.num_sequences)]
        self.reasoning_counts = [req.reasoning_tokens() for _ in range(req.layout.num_sequences)]

    def opening(self) -> list[Any]:
        role = {"role": "assistant", "content": ""}
        return [
            self.chunk(
                {
                    "index": self.req.layout.choice_of(s),
                    "delta": role,
                    "logprobs": None,
                    "finish_reason": None,
                }
            )
            for s in range(self.req.layout.num_sequences)
        ]

    def current_usage(self) -> dict[str, Any]:
        if not self.chat.reasoning.active:
            return super().current_usage()
        counts = [c.count() for c in self.reasoning_counts if c is not None]
        return with_reasoning_tokens(super().current_usage(), sum(counts))

    def choices_of(self, sequence: int, delta: dict[str, Any]) -> list[dict[str, Any]]:
        counter = self.reasoning_counts[sequence]
        if counter is not None:
            counter.feed(delta["text"], delta.get("output_ids", ()))
        index = self.req.layout.choice_of(sequence)
        logprobs = self.chat.logprobs_of(delta["meta_info"])
        reason = delta["meta_info"].get("finish_reason")
        reasoning, text = self._split(sequence, delta["text"], reason is not None)
        choices = []
        if reasoning:  # the delta's logprobs go with its first chunk
            choices.append(_delta_choice(index, {"reasoning_content": reasoning}, logprobs))
            logprobs = None
        if self.chat.tools.active:
            return choices + self._tool_choices(index, sequence, text, reason)
        if text or (logprobs is not None and logprobs["content"]):
            choices.append(_delta_choice(index, {"content": text}, logprobs))
        if reason is not None:
            choices.append(
                {
                    "index": index,
                    "delta": {},
                    "logprobs": None,
                    "finish_reason": finish_reason(reason),
                    "matched_stop": matched_stop(reason),
                }
            )
        return choices

    def _split(self, sequence: int, text: str, last: bool) -> tuple[str, str]:
        """The delta's reasoning to send and its content (all of it without a reasoning parser)."""
        deltas = self.reasoning_deltas[sequence]
        reasoning, content = deltas.feed(text)
        if last:
            more_reasoning, more_content = deltas.finish()
            reasoning, content = reasoning + more_reasoning, content + more_content
        return reasoning, content

    def _tool_choices(
        self, index: int, sequence: int, text: str, reason: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """With tools shown, deltas come from the sequence's tool-call stream parser."""
        deltas = self.tool_deltas[sequence]
        out = deltas.feed(text)
        if reason is not None:
            out += deltas.finish()
        choices = [{"index": index, "delta": d, "logprobs": None, "finish_reason": None} for d in out]
        if reason is not None:
            why = finish_reason(reason)
            choices.append(
                {
                    "index": index,
                    "delta": {},
                    "logprobs": None,
                    "finish_reason": "tool_calls" if deltas.num_calls and why == "stop" else why,
                    "matched_stop": matched_stop(reason),
                }
            )
        return choices


def _delta_choice(index: int, delta: dict[str, Any], logprobs: dict[str, Any] | None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": None}


def _formats_the_answer(body: dict[str, Any]) -> bool:
    response_format = body.get("response_format")
    return isinstance(response_format, dict) and response_format.get("type") not in (None, "text")
