"""One HTTP request's generation in the engine: submit, stream deltas (observed in the metrics),
clean up.

`start_generation` validates and normalises the request exactly as the engine will (so the
server knows every sequence's request id before anything runs), refuses ids already in flight
and oversized fan-outs, then submits. The returned `Generation` is an async iterator of engine
deltas (each with its sequence `index`); closing it before the end aborts the sequences still
running, which frees their KV slots (a client that went away costs nothing more).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from sglr.engine.finish import FinishAbort
from sglr.engine.io import SequenceSpec, normalize_generate_input
from sglr.errors import InvalidRequestError, LimitExceededError
from sglr.http.errors import ApiError, as_api_error
from sglr.limits import MAX_LOGPROBS
from sglr.server.accumulate import SequenceAccumulator
from sglr.server.metrics import SequenceMetrics
from sglr.server.param_names import ENGINE_NAMES, ParamNames

if TYPE_CHECKING:
    from sglr.server.state import ServerState

_NORMALIZE_KEYS = (
    "prompt", "input_ids", "sampling_params", "rid", "return_logprob", "logprob_start_len",
    "top_logprobs_num", "return_text_in_logprobs", "image_data", "video_data", "lora_path",
)  # fmt: skip


async def start_generation(
    state: ServerState, engine_kwargs: dict[str, Any], names: ParamNames = ENGINE_NAMES
) -> Generation:
    """`engine_kwargs` are `Engine.async_generate`'s (without `stream`); `names` says how the
    request spelled the fields the engine may name in an error. Raises `ApiError` for bad input,
    before anything is submitted."""
    args = {k: engine_kwargs.get(k) for k in _NORMALIZE_KEYS}
    limit = state.settings.max_sequences_per_request
    try:
        # Before normalising, which builds one spec per sequence: `n: 100000000` must cost nothing.
        _check_fan_out(args["prompt"], args["input_ids"], args["sampling_params"], limit)
        batch = normalize_generate_input(
            args["prompt"], args["input_ids"], args["sampling_params"], args["rid"], args["return_logprob"],
            args["logprob_start_len"], args["top_logprobs_num"], bool(args["return_text_in_logprobs"]),
            image_data=args["image_data"], video_data=args["video_data"], lora_path=args["lora_path"],
        )  # fmt: skip
        _check_top_logprobs(batch.specs)
        rids = [spec.rid for spec in batch.specs]
        state.inflight.add(rids)
        try:
            stream = await state.engine.async_generate(**dict(engine_kwargs, rid=rids, stream=True))
        except BaseException:
            state.inflight.discard(rids)
            raise
    except InvalidRequestError as exc:
        raise as_api_error(exc, names) from exc
    return Generation(state, stream, rids, batch.is_batch, names)


def _check_fan_out(prompt: Any, input_ids: Any, sampling_params: Any, limit: int) -> None:
    num_prompts = 1
    if isinstance(prompt, list):
        num_prompts = len(prompt)
    elif isinstance(input_ids, list) and input_ids and isinstance(input_ids[0], list):
        num_prompts = len(input_ids)
    params = sampling_params if isinstance(sampling_params, list) else [sampling_params]
    n_values = [p.get("n") for p in params if isinstance(p, dict)]
    num_samples = max((n for n in n_values if isinstance(n, int) and not isinstance(n, bool)), default=1)
    if num_prompts * num_samples > limit:
        raise LimitExceededError(
            f"this request fans out into {num_prompts * num_samples} sequences (prompts x n), "
            f"over the server's limit of {limit}",
            param="sampling_params.n" if num_samples > 1 else "text",
            limit="max_sequences_per_request",
        )


def _check_top_logprobs(specs: Sequence[SequenceSpec]) -> None:
    # Each output token would carry this many alternatives, text included.
    for spec in specs:
        if spec.top_logprobs_num > MAX_LOGPROBS:
            raise LimitExceededError(
                f"top_logprobs_num must be at most {MAX_LOGPROBS}, got {spec.top_logprobs_num}",
                param="top_logprobs_num",
                limit="max_logprobs",
            )


class Generation:
    """Deltas of all sequences of one request, interleaved; every delta carries `index`. Each
    sequence's deltas are observed into the server metrics as they pass."""

    def __init__(
        self,
        state: ServerState,
        stream: AsyncIterator[dict[str, Any]],
        rids: list[str],
        is_batch: bool,
        names: ParamNames = ENGINE_NAMES,
    ) -> None:
        self.state = state
        self.rids = rids
        self.is_batch = is_batch
        self.num_sequences = len(rids)
        self.names = names
        self._stream = stream
        metrics = state.metrics
        # Known before any delta (the front tokenized): a stream dropped early still counts them.
        prompt_lens = getattr(stream, "num_prompt_tokens", None) or [0] * len(rids)
        self._metrics = [SequenceMetrics(metrics, n) for n in prompt_lens] if metrics is not None else []
        self._pending: dict[str, Any] | None = None
        self._closed = False

    def __aiter__(self) -> Generation:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._pending is not None:
            delta, self._pending = self._pending, None
            return delta
        if self._closed:
            raise StopAsyncIteration
        try:
            delta = await self._stream.__anext__()
        except BaseException:  # the end, an engine failure, or cancelled: abort what still runs
            await self.aclose()
            raise
        delta.setdefault("index", 0)
        if self._metrics:
            self._metrics[delta["index"]].on_delta(delta)
        return delta

    def abort_error(self, delta: dict[str, Any]) -> ApiError | None:
        """The error to tell the client when the engine aborted this delta's sequence on its own
        (a bad constraint, an engine failure); None for a deliberate abort (`/abort_request`, a
        client that went away), whose partial result is returned as is."""
        reason = delta.get("meta_info", {}).get("finish_reason")
        if not isinstance(reason, FinishAbort) or reason.by_caller:
            return None
        return as_api_error(reason.error, self.names)

    def api_error(self, exc: BaseException) -> ApiError:
        """What the client is told about an exception raised while generating."""
        return as_api_error(exc, self.names)

    async def peek_error(self) -> ApiError | None:
        """Waits for the first delta; the error to answer with instead of streaming when the
        engine refused the request outright (e.g. a regex that does not compile)."""
        self._pending = await self.__anext__()
        return self.abort_error(self._pending)

    async def aclose(self) -> None:
        """Aborts what is still running and forgets the request ids (idempotent). Sequences that
        had not ended are counted in the metrics as aborted, before the engine hears of it."""
        if self._closed:
            return
        self._closed = True
        self._pending = None
        for sequence in self._metrics:
            sequence.on_close()
        try:
            aclose = getattr(self._stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        finally:
            self.state.inflight.discard(self.rids)


async def collect(gen: Generation) -> list[dict[str, Any]]:
    """Every sequence's whole response, in sequence order; raises for an engine-side error."""
    accumulators = [SequenceAccumulator() for _ in range(gen.num_sequences)]
    try:
        async for delta in gen:
            accumulators[delta["index"]].add(delta)
    finally:
        await gen.aclose()
    results = [acc.snapshot() for acc in accumulators]
    for result in results:
        error = gen.abort_error(result)
        if error is not None:
            raise error
    return results
