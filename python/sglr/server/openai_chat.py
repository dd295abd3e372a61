"""`POST /v1/chat/completions`: OpenAI's chat API over the engine.

Messages are rendered with the chat template; `max_completion_tokens` (or the older
`max_tokens`) bounds the reply, by default up to the context length; `logprobs` and
`top_logprobs`; `response_format` json_schema / json_object and the `regex` extension constrain
the reply. Streams send a role chunk per choice, content deltas, a finish chunk per choice,
then (with `stream_options.include_usage`) a usage chunk, and `data: [DONE]`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.server.body import read_json_object
from sglr.server.chat_messages import normalize_messages
from sglr.server.errors import ApiError, abort_error, as_api_error
from sglr.server.fields import check_known_fields, get_bool, get_dict, get_int, get_str
from sglr.server.generation import Generation, collect, start_generation
from sglr.server.jsonout import JSONOut
from sglr.server.openai_common import (
    ChoiceLayout,
    ResponseIds,
    chat_logprobs,
    finish_reason,
    matched_stop,
    usage,
)
from sglr.server.openai_params import (
    MAX_LOGPROBS,
    SAMPLING_FIELDS,
    StreamOptions,
    check_model,
    reject_unsupported,
    sampling_params,
    stream_options,
)
from sglr.server.sse import (
    DONE,
    ClientDisconnected,
    EventStreamResponse,
    run_until_disconnect,
    sse_error,
    sse_event,
)
from sglr.server.state import ServerState

_FIELDS = SAMPLING_FIELDS | {
    "messages", "max_completion_tokens", "logprobs", "top_logprobs", "tools", "tool_choice",
    "parallel_tool_calls", "functions", "function_call", "chat_template_kwargs", "reasoning_effort",
    "modalities", "audio", "prediction",
}  # fmt: skip
_UNSUPPORTED = {
    "functions": "function calling is not supported",
    "function_call": "function calling is not supported",
    "audio": "audio output is not supported",
    "prediction": "predicted outputs are not supported",
}


class _Request:
    """A validated chat request, rendered to prompt token ids."""

    def __init__(self, state: ServerState, body: dict[str, Any]) -> None:
        check_known_fields(body, _FIELDS, "the chat completions request")
        reject_unsupported(body, _UNSUPPORTED)
        self.model = check_model(state, body)
        tool_choice = body.get("tool_choice")
        if body.get("tools") and tool_choice != "none":
            raise ApiError.bad_request(
                'tool calling is not supported (send tool_choice: "none" to ignore tools)', "tools"
            )
        modalities = body.get("modalities")
        if modalities is not None and modalities != ["text"]:
            raise ApiError.bad_request("only the text modality is supported", "modalities")
        messages = normalize_messages(body.get("messages"))
        template_kwargs = get_dict(body, "chat_template_kwargs") or {}
        text = state.engine.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, **template_kwargs
        )
        self.prompt_ids = state.engine.tokenizer.encode(text, add_special_tokens=False)
        if not self.prompt_ids:
            raise ApiError.bad_request("the messages render to an empty prompt", "messages")
        max_tokens = get_int(body, "max_completion_tokens", None, 1)
        if max_tokens is None:
            max_tokens = get_int(body, "max_tokens", None, 1)
        self.logprobs = bool(get_bool(body, "logprobs", False))
        self.top_logprobs = get_int(body, "top_logprobs", 0, 0, MAX_LOGPROBS)
        if self.top_logprobs and not self.logprobs:
            raise ApiError.bad_request("top_logprobs requires logprobs to be true", "top_logprobs")
        self.stream = bool(get_bool(body, "stream", False))
        self.options: StreamOptions = stream_options(body, self.stream)
        self.params = sampling_params(body, max_tokens)
        self.layout = ChoiceLayout(1, self.params["n"])
        self.ids = ResponseIds("chatcmpl", get_str(body, "rid"))

    def engine_kwargs(self) -> dict[str, Any]:
        return {
            "input_ids": [self.prompt_ids],
            "sampling_params": self.params,
            "rid": self.ids.request_ids(self.layout.num_sequences),
            "return_logprob": self.logprobs,
            "top_logprobs_num": self.top_logprobs,
            "return_text_in_logprobs": True,
        }

    def header(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.ids.response_id,
            "object": kind,
            "created": self.ids.created,
            "model": self.model,
            "system_fingerprint": None,
        }

    def logprobs_of(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        tops = meta.get("output_top_logprobs") if self.top_logprobs else None
        return chat_logprobs(meta.get("output_token_logprobs", []), tops, self.top_logprobs)


async def chat_completions(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    req = _Request(state, body)
    gen = await start_generation(state, **req.engine_kwargs())
    handed_over = False
    try:
        if req.stream:
            error = await run_until_disconnect(request.receive, gen.peek_error())
            if error is not None:
                raise error
            handed_over = True
            return EventStreamResponse(_events(req, gen))
        results = await run_until_disconnect(request.receive, collect(gen))
        return JSONOut(_response(req, results))
    except ClientDisconnected:
        return Response(status_code=499)
    finally:
        if not handed_over:
            await gen.aclose()


def _response(req: _Request, results: list[dict[str, Any]]) -> dict[str, Any]:
    choices: list[dict[str, Any]] = [{}] * req.layout.num_sequences
    for sequence, result in enumerate(results):
        meta = result["meta_info"]
        reason = meta.get("finish_reason")
        index = req.layout.choice_of(sequence)
        choices[index] = {
            "index": index,
            "message": {"role": "assistant", "content": result["text"], "tool_calls": None, "refusal": None},
            "logprobs": req.logprobs_of(meta),
            "finish_reason": finish_reason(reason),
            "matched_stop": matched_stop(reason),
        }
    metas = [r["meta_info"] for r in results]
    return {**req.header("chat.completion"), "choices": choices, "usage": usage(metas, req.layout)}


async def _events(req: _Request, gen: Generation) -> AsyncIterator[bytes]:
    header = req.header("chat.completion.chunk")
    metas: list[dict[str, Any]] = [{} for _ in range(req.layout.num_sequences)]

    def chunk(choice: dict[str, Any]) -> bytes:
        payload = {**header, "choices": [choice]}
        if req.options.include_usage:
            payload["usage"] = usage(metas, req.layout) if req.options.continuous_usage_stats else None
        return sse_event(payload)

    try:
        for sequence in range(req.layout.num_sequences):
            yield chunk(
                {
                    "index": req.layout.choice_of(sequence),
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            )
        async for delta in gen:
            sequence = delta["index"]
            meta = delta["meta_info"]
            reason = meta.get("finish_reason")
            error = abort_error(reason or {})
            if error is not None:
                yield sse_error(error)
                break
            metas[sequence] = {**metas[sequence], **meta}
            index = req.layout.choice_of(sequence)
            logprobs = req.logprobs_of(meta)
            if delta["text"] or (logprobs is not None and logprobs["content"]):
                yield chunk(
                    {
                        "index": index,
                        "delta": {"content": delta["text"]},
                        "logprobs": logprobs,
                        "finish_reason": None,
                    }
                )
            if reason is not None:
                yield chunk(
                    {
                        "index": index,
                        "delta": {},
                        "logprobs": None,
                        "finish_reason": finish_reason(reason),
                        "matched_stop": matched_stop(reason),
                    }
                )
        else:
            if req.options.include_usage:
                yield sse_event({**header, "choices": [], "usage": usage(metas, req.layout)})
    except Exception as exc:
        yield sse_error(as_api_error(exc))
    finally:
        await gen.aclose()
    yield DONE
