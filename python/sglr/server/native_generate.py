"""`POST /generate`: SGLang's native generation route.

Request: `text` or `input_ids` (one prompt or a batch), `sampling_params` (one object or one per
prompt), `rid`, `stream`, `return_logprob`, `logprob_start_len`, `top_logprobs_num`,
`return_text_in_logprobs`. Response: `{"text", "output_ids", "meta_info"}`, a list of them for
a batch or `n > 1`. Streams are SSE: by default every event holds the cumulative response so far
(SGLang's default, which its `RuntimeEndpoint` relies on); with
`--incremental-streaming-output`, only what is new. Batch events carry `index`. The stream ends
with `data: [DONE]`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.server.accumulate import SequenceAccumulator
from sglr.server.body import read_json_object
from sglr.server.errors import abort_error, as_api_error
from sglr.server.fields import check_known_fields, get_bool, require_null
from sglr.server.generation import Generation, collect, start_generation
from sglr.server.jsonout import JSONOut
from sglr.server.sse import (
    DONE,
    ClientDisconnected,
    EventStreamResponse,
    run_until_disconnect,
    sse_error,
    sse_event,
)
from sglr.server.state import ServerState

_FIELDS = frozenset({
    "text", "input_ids", "sampling_params", "rid", "stream", "return_logprob", "logprob_start_len",
    "top_logprobs_num", "return_text_in_logprobs",
})  # fmt: skip
# SGLang fields without an effect here (routing, logging and priority hints): accepted, ignored.
_IGNORED = frozenset({
    "log_metrics", "priority", "modalities", "custom_labels", "extra_key", "cache_salt", "routing_key",
    "no_logs", "background", "conversation_id", "data_parallel_rank", "routed_dp_rank",
    "bootstrap_host", "bootstrap_port", "bootstrap_room", "bootstrap_pair_key",
})  # fmt: skip
# SGLang features sglr does not have: accepted only when empty.
_UNSUPPORTED = {
    "image_data": "this server serves text-only models",
    "video_data": "this server serves text-only models",
    "audio_data": "this server serves text-only models",
    "input_embeds": "send text or input_ids",
    "lora_path": "LoRA adapters are not supported",
    "lora_id": "LoRA adapters are not supported",
    "session_params": "sessions are not supported",
    "custom_logit_processor": "custom logit processors are not supported",
    "return_hidden_states": "hidden states are not returned",
    "return_entropy": "entropy is not returned",
    "token_ids_logprob": "logprobs of chosen token ids are not returned; use top_logprobs_num",
    "return_prompt_token_ids": "prompt token ids are not returned",
}
_KNOWN = _FIELDS | _IGNORED | frozenset(_UNSUPPORTED)


def parse_generate_request(body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The engine's keyword arguments and whether to stream; 400s name the offending field."""
    check_known_fields(body, _KNOWN, "the /generate request")
    for name, reason in _UNSUPPORTED.items():
        require_null(body, name, reason)
    kwargs = {
        "prompt": body.get("text"),
        "input_ids": body.get("input_ids"),
        "sampling_params": body.get("sampling_params"),
        "rid": body.get("rid"),
        "return_logprob": body.get("return_logprob"),
        "logprob_start_len": body.get("logprob_start_len"),
        "top_logprobs_num": body.get("top_logprobs_num"),
        "return_text_in_logprobs": get_bool(body, "return_text_in_logprobs", False),
    }
    return kwargs, bool(get_bool(body, "stream", False))


async def generate(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    kwargs, stream = parse_generate_request(body)
    gen = await start_generation(state, **kwargs)
    handed_over = False  # the event stream closes the generation from then on
    try:
        if stream:
            # Wait for the first event: a request the engine refuses gets an HTTP error status.
            error = await run_until_disconnect(request.receive, gen.peek_error())
            if error is not None:
                raise error
            handed_over = True
            return EventStreamResponse(_events(gen, state.settings.incremental_streaming_output))
        return JSONOut(await run_until_disconnect(request.receive, _collect(gen)))
    except ClientDisconnected:
        return Response(status_code=499)  # nobody reads it; the generation was aborted
    finally:
        if not handed_over:
            await gen.aclose()


async def _collect(gen: Generation) -> dict[str, Any] | list[dict[str, Any]]:
    results = await collect(gen)
    return results if gen.is_batch else results[0]


async def _events(gen: Generation, incremental: bool) -> AsyncIterator[bytes]:
    accumulators = [SequenceAccumulator() for _ in range(gen.num_sequences)]
    try:
        async for delta in gen:
            index = delta.pop("index")
            error = abort_error(delta["meta_info"].get("finish_reason"))
            if error is not None:
                yield sse_error(error)
                break
            if incremental:
                event = delta
            else:
                accumulators[index].add(delta)
                event = accumulators[index].snapshot()
            if gen.is_batch:
                event["index"] = index
            yield sse_event(event)
    except Exception as exc:
        yield sse_error(as_api_error(exc))
    finally:
        await gen.aclose()
    yield DONE
