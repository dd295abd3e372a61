"""`POST /v1/completions`: OpenAI's (legacy) completions API over the engine.

`prompt` is a string, a list of strings, a list of token ids or a list of such lists; `n`
samples per prompt; `echo` prepends the prompt (and, with `logprobs`, scores it: the first
prompt token has logprob null); `max_tokens` defaults to 16 and may be 0 (score only).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.server.body import read_json_object
from sglr.server.errors import ApiError, abort_error, as_api_error
from sglr.server.fields import check_known_fields, get_bool, get_int, get_str
from sglr.server.generation import Generation, collect, start_generation
from sglr.server.jsonout import JSONOut
from sglr.server.openai_common import (
    ChoiceLayout,
    ResponseIds,
    completion_logprobs,
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

_FIELDS = SAMPLING_FIELDS | {"prompt", "echo", "logprobs", "suffix", "best_of", "json_schema"}
_UNSUPPORTED = {"suffix": "insertion (suffix) is not supported"}


def _prompts(body: dict[str, Any]) -> tuple[list[str] | None, list[list[int]] | None]:
    prompt = body.get("prompt")
    if prompt is None or prompt == "" or prompt == []:
        raise ApiError.bad_request("Prompt cannot be empty", "prompt")
    if isinstance(prompt, str):
        return [prompt], None
    if isinstance(prompt, list):
        if all(isinstance(p, str) for p in prompt):
            if any(not p for p in prompt):
                raise ApiError.bad_request("Prompt cannot be empty", "prompt")
            return list(prompt), None
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return None, [list(prompt)]
        if all(
            isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p)
            for p in prompt
        ):
            return None, [list(p) for p in prompt]
    raise ApiError.bad_request(
        "prompt must be a string, an array of strings, an array of token ids or an array of non-empty arrays of token ids",
        "prompt",
    )


class _Request:
    """A validated completions request."""

    def __init__(self, state: ServerState, body: dict[str, Any]) -> None:
        check_known_fields(body, _FIELDS, "the completions request")
        reject_unsupported(body, _UNSUPPORTED)
        self.model = check_model(state, body)
        self.texts, self.token_prompts = _prompts(body)
        self.max_tokens = get_int(body, "max_tokens", 16, 0)
        self.echo = bool(get_bool(body, "echo", False))
        self.logprobs = get_int(body, "logprobs", None, 0, MAX_LOGPROBS)
        self.stream = bool(get_bool(body, "stream", False))
        self.options: StreamOptions = stream_options(body, self.stream)
        self.params = sampling_params(body, self.max_tokens)
        best_of = get_int(body, "best_of", None, 1)
        if best_of is not None and best_of != self.params["n"]:
            raise ApiError.bad_request("best_of is not supported (it must equal n when given)", "best_of")
        prompts = self.texts if self.texts is not None else self.token_prompts
        assert prompts is not None
        self.layout = ChoiceLayout(len(prompts), self.params["n"])
        self.ids = ResponseIds("cmpl", get_str(body, "rid"))

    def engine_kwargs(self) -> dict[str, Any]:
        want_logprobs = self.logprobs is not None
        return {
            "prompt": self.texts,
            "input_ids": self.token_prompts,
            "sampling_params": self.params,
            "rid": self.ids.request_ids(self.layout.num_sequences),
            "return_logprob": want_logprobs,
            "top_logprobs_num": self.logprobs or 0,
            "logprob_start_len": 0 if self.echo and want_logprobs else -1,
            "return_text_in_logprobs": True,
        }

    def echo_text(self, state: ServerState, prompt: int) -> str:
        if self.texts is not None:
            return self.texts[prompt]
        assert self.token_prompts is not None
        return state.engine.tokenizer.decode(self.token_prompts[prompt], skip_special_tokens=False)

    def header(self) -> dict[str, Any]:
        return {
            "id": self.ids.response_id,
            "object": "text_completion",
            "created": self.ids.created,
            "model": self.model,
        }


async def completions(state: ServerState, request: Request) -> Response:
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
            return EventStreamResponse(_events(state, req, gen))
        results = await run_until_disconnect(request.receive, collect(gen))
        return JSONOut(_response(state, req, results))
    except ClientDisconnected:
        return Response(status_code=499)
    finally:
        if not handed_over:
            await gen.aclose()


def _logprobs_of(
    req: _Request, meta: dict[str, Any], offset: int, with_prompt: bool
) -> tuple[dict[str, Any] | None, int]:
    if req.logprobs is None:
        return None, offset
    entries = list(meta.get("output_token_logprobs", []))
    tops = list(meta.get("output_top_logprobs", [])) if req.logprobs > 0 else None
    if with_prompt:
        entries = list(meta.get("input_token_logprobs", [])) + entries
        if tops is not None:
            tops = list(meta.get("input_top_logprobs", [])) + tops
    return completion_logprobs(entries, tops, offset, req.logprobs)


def _response(state: ServerState, req: _Request, results: list[dict[str, Any]]) -> dict[str, Any]:
    choices: list[dict[str, Any]] = [{}] * req.layout.num_sequences
    for sequence, result in enumerate(results):
        meta = result["meta_info"]
        prompt = req.layout.prompt_of(sequence)
        prefix = req.echo_text(state, prompt) if req.echo else ""
        logprobs, _ = _logprobs_of(req, meta, 0, with_prompt=req.echo)
        reason = meta.get("finish_reason")
        choices[req.layout.choice_of(sequence)] = {
            "index": req.layout.choice_of(sequence),
            "text": prefix + result["text"],
            "logprobs": logprobs,
            "finish_reason": finish_reason(reason),
            "matched_stop": matched_stop(reason),
        }
    metas = [r["meta_info"] for r in results]
    return {**req.header(), "choices": choices, "usage": usage(metas, req.layout)}


async def _events(state: ServerState, req: _Request, gen: Generation) -> AsyncIterator[bytes]:
    metas: list[dict[str, Any]] = [{} for _ in range(req.layout.num_sequences)]
    offsets = [0] * req.layout.num_sequences
    started = [False] * req.layout.num_sequences
    header = req.header()
    try:
        async for delta in gen:
            sequence = delta["index"]
            meta = delta["meta_info"]
            reason = meta.get("finish_reason")
            error = abort_error(reason or {})
            if error is not None:
                yield sse_error(error)
                break
            metas[sequence] = {**metas[sequence], **meta}
            text = delta["text"]
            first = not started[sequence]
            started[sequence] = True
            if first and req.echo:
                text = req.echo_text(state, req.layout.prompt_of(sequence)) + text
            logprobs, offsets[sequence] = _logprobs_of(
                req, meta, offsets[sequence], with_prompt=first and req.echo
            )
            has_logprobs = logprobs is not None and logprobs["tokens"]
            if not text and reason is None and not has_logprobs:
                continue
            chunk = {
                **header,
                "choices": [
                    {
                        "index": req.layout.choice_of(sequence),
                        "text": text,
                        "logprobs": logprobs,
                        "finish_reason": finish_reason(reason),
                        "matched_stop": matched_stop(reason),
                    }
                ],
            }
            if req.options.include_usage:
                chunk["usage"] = usage(metas, req.layout) if req.options.continuous_usage_stats else None
            yield sse_event(chunk)
        else:
            if req.options.include_usage:
                yield sse_event({**header, "choices": [], "usage": usage(metas, req.layout)})
    except Exception as exc:
        yield sse_error(as_api_error(exc))
    finally:
        await gen.aclose()
    yield DONE
