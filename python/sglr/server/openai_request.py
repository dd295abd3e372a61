"""What chat and completions requests share: known fields, the model, sampling, `n`, stream
options, response ids, and the shape of a whole (non-stream) response."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sglr.server.errors import ApiError
from sglr.server.fields import check_known_fields, get_bool, get_dict, get_str, require_null
from sglr.server.openai_common import ChoiceLayout, ResponseIds, finish_reason, matched_stop, usage
from sglr.server.openai_params import sampling_params
from sglr.server.param_names import ParamNames
from sglr.server.state import ServerState


@dataclass(frozen=True)
class StreamOptions:
    include_usage: bool = False
    continuous_usage_stats: bool = False


class OpenAIRequest:
    """A validated OpenAI request. A route's subclass reads its own fields after `__init__`, then
    calls `_read_sampling` and `_number_choices`, in that order (which fields are read first
    decides which error a request with several mistakes gets)."""

    params: dict[str, Any]
    names: ParamNames
    layout: ChoiceLayout
    ids: ResponseIds

    def __init__(
        self,
        state: ServerState,
        body: dict[str, Any],
        known: frozenset[str],
        unsupported: dict[str, str],
        where: str,
    ) -> None:
        """`known`: the route's fields; `unsupported`: field -> why it is refused unless empty;
        `where` names the request in messages."""
        check_known_fields(body, known, where)
        for name, reason in unsupported.items():
            require_null(body, name, reason)
        self.model = _check_model(state, body)

    def _read_sampling(self, body: dict[str, Any], max_tokens: int | None, max_tokens_field: str) -> None:
        self.stream = bool(get_bool(body, "stream", False))
        self.options = _stream_options(body, self.stream)
        sampling = sampling_params(body, max_tokens, max_tokens_field)
        self.params, self.names = sampling.params, sampling.names

    def _number_choices(self, body: dict[str, Any], num_prompts: int, id_prefix: str) -> None:
        self.layout = ChoiceLayout(num_prompts, self.params["n"])
        self.ids = ResponseIds(id_prefix, get_str(body, "rid"))

    def header(self, kind: str) -> dict[str, Any]:
        return {"id": self.ids.response_id, "object": kind, "created": self.ids.created, "model": self.model}

    def whole_response(
        self,
        kind: str,
        results: list[dict[str, Any]],
        content: Callable[[int, dict[str, Any]], dict[str, Any]],
    ) -> dict[str, Any]:
        """The non-stream response; `content(sequence, result)` gives a choice's own fields."""
        choices: list[dict[str, Any]] = [{}] * self.layout.num_sequences
        for sequence, result in enumerate(results):
            reason = result["meta_info"].get("finish_reason")
            index = self.layout.choice_of(sequence)
            choices[index] = {
                "index": index,
                **content(sequence, result),
                "finish_reason": finish_reason(reason),
                "matched_stop": matched_stop(reason),
            }
        metas = [r["meta_info"] for r in results]
        return {**self.header(kind), "choices": choices, "usage": usage(metas, self.layout)}


def _check_model(state: ServerState, body: dict[str, Any]) -> str:
    """The `model` to echo back; 404 for a model this server does not serve."""
    model = get_str(body, "model")
    if model is None:
        return state.engine.served_model_name
    if model not in state.model_names:
        raise ApiError(
            404,
            f"The model `{model}` does not exist (this server serves `{state.engine.served_model_name}`)",
            "model",
        )
    return model


def _stream_options(body: dict[str, Any], stream: bool) -> StreamOptions:
    raw = get_dict(body, "stream_options")
    if raw is None:
        return StreamOptions()
    if not stream:
        raise ApiError.bad_request("stream_options is only allowed when stream is true", "stream_options")
    unknown = sorted(set(raw) - {"include_usage", "continuous_usage_stats"})
    if unknown:
        raise ApiError.bad_request(
            f"unknown field `{unknown[0]}` in stream_options", f"stream_options.{unknown[0]}"
        )
    return StreamOptions(
        include_usage=bool(get_bool(raw, "include_usage", False)),
        continuous_usage_stats=bool(get_bool(raw, "continuous_usage_stats", False)),
    )
