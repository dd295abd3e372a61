"""`POST /v1/completions`: OpenAI's (legacy) completions API over the engine.

`prompt` is a string, a list of strings, a list of token ids or a list of such lists; `n`
samples per prompt; `echo` prepends the prompt (and, with `logprobs`, scores it: the first
prompt token has logprob null); `max_tokens` defaults to 16 and may be 0 (score only).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.http.errors import ApiError
from sglr.http.request import get_bool, get_int, read_json_object
from sglr.limits import MAX_LOGPROBS
from sglr.server.generation import start_generation
from sglr.server.generation_response import json_response, stream_response
from sglr.server.openai.protocol import (
    OpenAIChunks,
    OpenAIRequest,
    completion_logprobs,
    finish_reason,
    matched_stop,
)
from sglr.server.openai.sampling import SAMPLING_FIELDS
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


class _CompletionRequest(OpenAIRequest):
    """A validated completions request."""

    def __init__(self, state: ServerState, body: dict[str, Any]) -> None:
        super().__init__(state, body, _FIELDS, _UNSUPPORTED, "the completions request")
        self.texts, self.token_prompts = _prompts(body)
        self.max_tokens = get_int(body, "max_tokens", 16, 0)
        self.echo = bool(get_bool(body, "echo", False))
        self.logprobs = get_int(body, "logprobs", None, 0, MAX_LOGPROBS)
        self._read_sampling(body, self.max_tokens, "max_tokens", "prompt")
        best_of = get_int(body, "best_of", None, 1)
        if best_of is not None and best_of != self.params["n"]:
            raise ApiError.bad_request("best_of is not supported (it must equal n when given)", "best_of")
        prompts = self.texts if self.texts is not None else self.token_prompts
        assert prompts is not None
        self._number_choices(body, len(prompts), id_prefix="cmpl")

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
            "lora_path": self.lora_path,
            "priority": self.priority,
        }

    def echo_text(self, state: ServerState, prompt: int) -> str:
        if self.texts is not None:
            return self.texts[prompt]
        assert self.token_prompts is not None
        return state.engine.tokenizer.decode(self.token_prompts[prompt], skip_special_tokens=False)

    def logprobs_of(
        self, meta: dict[str, Any], offset: int, with_prompt: bool
    ) -> tuple[dict[str, Any] | None, int]:
        """Logprobs of the tokens in `meta` (after the prompt's when `with_prompt`) and the text
        offset after them."""
        if self.logprobs is None:
            return None, offset
        entries = list(meta.get("output_token_logprobs", []))
        tops = list(meta.get("output_top_logprobs", [])) if self.logprobs > 0 else None
        if with_prompt:
            entries = list(meta.get("input_token_logprobs", [])) + entries
            if tops is not None:
                tops = list(meta.get("input_top_logprobs", [])) + tops
        return completion_logprobs(entries, tops, offset, self.logprobs)


async def completions(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    return await answer_completion(state, request, body)


async def answer_completion(state: ServerState, request: Request, body: dict[str, Any]) -> Response:
    """The route after the body is read (a batch's lines come here too, `openai.batches`)."""
    req = _CompletionRequest(state, body)
    gen = await start_generation(state, req.engine_kwargs(), req.names)
    if req.stream:
        return await stream_response(request, gen, _CompletionChunks(state, req))
    return await json_response(request, gen, lambda results: _response(state, req, results))


def _response(state: ServerState, req: _CompletionRequest, results: list[dict[str, Any]]) -> dict[str, Any]:
    def content(sequence: int, result: dict[str, Any]) -> dict[str, Any]:
        prefix = req.echo_text(state, req.layout.prompt_of(sequence)) if req.echo else ""
        logprobs, _ = req.logprobs_of(result["meta_info"], 0, with_prompt=req.echo)
        return {"text": prefix + result["text"], "logprobs": logprobs}

    return req.whole_response("text_completion", results, content)


class _CompletionChunks(OpenAIChunks):
    """One chunk per delta with something new in it; the echoed prompt leads a choice's first."""

    def __init__(self, state: ServerState, req: _CompletionRequest) -> None:
        super().__init__(req, "text_completion")
        self.state = state
        self.completion = req
        self.offsets = [0] * req.layout.num_sequences  # text offsets for logprobs
        self.started = [False] * req.layout.num_sequences

    def choices_of(self, sequence: int, delta: dict[str, Any]) -> list[dict[str, Any]]:
        req = self.completion
        meta = delta["meta_info"]
        reason = meta.get("finish_reason")
        text = delta["text"]
        first = not self.started[sequence]
        self.started[sequence] = True
        if first and req.echo:
            text = req.echo_text(self.state, req.layout.prompt_of(sequence)) + text
        logprobs, self.offsets[sequence] = req.logprobs_of(
            meta, self.offsets[sequence], with_prompt=first and req.echo
        )
        has_logprobs = logprobs is not None and logprobs["tokens"]
        if not text and reason is None and not has_logprobs:
            return []
        return [
            {
                "index": req.layout.choice_of(sequence),
                "text": text,
                "logprobs": logprobs,
                "finish_reason": finish_reason(reason),
                "matched_stop": matched_stop(reason),
            }
        ]
