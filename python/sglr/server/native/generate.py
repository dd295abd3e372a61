"""`POST /generate`: SGLang's native generation route.

Request: `text` or `input_ids` (one prompt or a batch), `sampling_params` (one object or one per
prompt), `rid`, `stream`, `return_logprob`, `logprob_start_len`, `top_logprobs_num`,
`return_text_in_logprobs`, `image_data` (for a model that takes images: per prompt an image
or a list, as data URLs or base64; paths and URLs with `--allow-image-urls`), `video_data`
(per prompt a list of videos, each a list of frames or an encoded video file), `lora_path` (the
LoRA adapter by name, or one name per prompt with null for the base model; an adapter that is
not loaded is a 400 naming it), `priority` (with `--enable-priority-scheduling`) and
`session_params` (a request of a session opened with `/open_session`), both in
docs/scheduling.md. Response: `{"text", "output_ids", "meta_info"}`, a list of them for a batch
or `n > 1`. Streams are SSE: by default every event holds the cumulative response so far
(SGLang's default, which its `RuntimeEndpoint` relies on); with
`--incremental-streaming-output`, only what is new. Batch events carry `index`. The stream ends
with `data: [DONE]`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.http.request import check_known_fields, get_bool, read_json_object, require_null
from sglr.server.accumulate import EncodedAccumulator
from sglr.server.generation import Generation, start_generation
from sglr.server.generation_response import DeltaRenderer, json_response, stream_response
from sglr.server.image_sources import ImageSources, RequestImages
from sglr.server.state import ServerState

_FIELDS = frozenset({
    "text", "input_ids", "sampling_params", "rid", "stream", "return_logprob", "logprob_start_len",
    "top_logprobs_num", "return_text_in_logprobs", "image_data", "video_data", "lora_path", "priority",
    "session_params",
})  # fmt: skip
# SGLang fields without an effect here (routing and logging hints): accepted, ignored.
_IGNORED = frozenset({
    "log_metrics", "modalities", "custom_labels", "extra_key", "cache_salt", "routing_key",
    "no_logs", "background", "conversation_id", "data_parallel_rank", "routed_dp_rank",
    "bootstrap_host", "bootstrap_port", "bootstrap_room", "bootstrap_pair_key",
})  # fmt: skip
# SGLang features sglr does not have: accepted only when empty.
_UNSUPPORTED = {
    "audio_data": "this server serves text-only models",
    "input_embeds": "send text or input_ids",
    "lora_id": "adapter ids are the server's own; name the adapter with lora_path",
    "custom_logit_processor": "custom logit processors are not supported",
    "return_hidden_states": "hidden states are not returned",
    "return_entropy": "entropy is not returned",
    "token_ids_logprob": "logprobs of chosen token ids are not returned; use top_logprobs_num",
    "return_prompt_token_ids": "prompt token ids are not returned",
}
_KNOWN = _FIELDS | _IGNORED | frozenset(_UNSUPPORTED)


def parse_generate_request(
    body: dict[str, Any], images: RequestImages | None = None
) -> tuple[dict[str, Any], bool]:
    """The engine's keyword arguments and whether to stream; 400s name the offending field.
    The image sources are checked into `images` (default: inline ones only)."""
    check_known_fields(body, _KNOWN, "the /generate request")
    for name, reason in _UNSUPPORTED.items():
        require_null(body, name, reason)
    is_batch = isinstance(body.get("text"), list) or (
        isinstance(body.get("input_ids"), list)
        and bool(body["input_ids"])
        and isinstance(body["input_ids"][0], list)
    )
    images = images if images is not None else RequestImages(ImageSources())
    images.check_data(body.get("image_data"), is_batch, "image_data")
    images.check_data(body.get("video_data"), is_batch, "video_data")
    kwargs = {
        "prompt": body.get("text"),
        "input_ids": body.get("input_ids"),
        "sampling_params": body.get("sampling_params"),
        "rid": body.get("rid"),
        "return_logprob": body.get("return_logprob"),
        "logprob_start_len": body.get("logprob_start_len"),
        "top_logprobs_num": body.get("top_logprobs_num"),
        "return_text_in_logprobs": get_bool(body, "return_text_in_logprobs", False),
        "image_data": body.get("image_data"),
        "video_data": body.get("video_data"),
        "lora_path": body.get("lora_path"),
        "priority": body.get("priority"),
        "session_params": body.get("session_params"),
    }
    return kwargs, bool(get_bool(body, "stream", False))


async def generate(state: ServerState, request: Request) -> Response:
    body = await read_json_object(request, state.settings.max_body_bytes)
    images = RequestImages(state.image_sources)
    kwargs, stream = parse_generate_request(body, images)
    await images.read()
    for name in ("image_data", "video_data"):
        kwargs[name] = images.resolved_data(kwargs[name], name)
    gen = await start_generation(state, kwargs)
    if stream:
        return await stream_response(
            request, gen, _NativeEvents(gen, state.settings.incremental_streaming_output)
        )
    return await json_response(request, gen, lambda results: results if gen.is_batch else results[0])


class _NativeEvents(DeltaRenderer):
    """Each event is a sequence's whole response so far or, `incremental`, only what is new;
    batch events say which sequence with `index`."""

    def __init__(self, gen: Generation, incremental: bool) -> None:
        self.is_batch = gen.is_batch
        self.incremental = incremental
        self.accumulators = [EncodedAccumulator() for _ in range(gen.num_sequences)]

    def on_delta(self, delta: dict[str, Any]) -> list[Any]:
        index = delta.pop("index")
        if self.incremental:
            if self.is_batch:
                delta["index"] = index
            return [delta]
        accumulator = self.accumulators[index]
        accumulator.add(delta)
        return [accumulator.snapshot_json(index if self.is_batch else None)]
