"""Small server pieces without a server: stream accumulation, choice numbering, JSON output,
settings validation, the auth check, health while shutting down, and per-sequence metrics."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from sglr.errors import EngineConfigError
from sglr.http.jsonout import dumps
from sglr.server.accumulate import EncodedAccumulator, SequenceAccumulator
from sglr.server.metrics import SequenceMetrics, ServerMetrics
from sglr.server.openai.protocol import ChoiceLayout, ResponseIds, usage
from sglr.server.param_names import ENGINE_NAMES, ParamNames
from sglr.server.settings import ServerSettings


def test_accumulator_rebuilds_the_whole_response_from_deltas() -> None:
    acc = SequenceAccumulator()
    acc.add(
        {
            "text": "He",
            "output_ids": [1],
            "meta_info": {
                "completion_tokens": 1,
                "output_token_logprobs": [[-1.0, 1, None]],
                "finish_reason": None,
            },
        }
    )
    first = acc.snapshot()
    acc.add(
        {
            "text": "llo",
            "output_ids": [2, 3],
            "meta_info": {
                "completion_tokens": 3,
                "output_token_logprobs": [[-2.0, 2, None], [-3.0, 3, None]],
                "finish_reason": {"type": "length", "length": 3},
            },
        }
    )
    whole = acc.snapshot()
    assert whole["text"] == "Hello" and whole["output_ids"] == [1, 2, 3]
    assert [e[1] for e in whole["meta_info"]["output_token_logprobs"]] == [1, 2, 3]
    assert whole["meta_info"]["completion_tokens"] == 3 and acc.finish_reason["type"] == "length"
    # Snapshots handed out earlier do not change.
    assert first["output_ids"] == [1] and len(first["meta_info"]["output_token_logprobs"]) == 1
    assert first["meta_info"]["finish_reason"] is None
    # A final delta without logprob keys keeps the ones gathered so far.
    acc.add({"text": "", "output_ids": [], "meta_info": {"completion_tokens": 3}})
    assert len(acc.snapshot()["meta_info"]["output_token_logprobs"]) == 3


def test_encoded_accumulator_writes_the_snapshot_json_from_its_pieces() -> None:
    acc = EncodedAccumulator()
    deltas = [
        {
            "text": 'a "quoted"\n\\ ',
            "output_ids": [7],
            "meta_info": {"completion_tokens": 1, "finish_reason": None},
        },
        {"text": "", "output_ids": [], "meta_info": {"completion_tokens": 1, "finish_reason": None}},
        {
            "text": "é\t\u0001 😀",
            "output_ids": [8, 9],
            "meta_info": {
                "completion_tokens": 3,
                "output_token_logprobs": [[float("nan"), 8, None], [-0.5, 9, "x"]],
                "finish_reason": {"type": "stop", "matched": 2},
            },
        },
    ]
    for delta in deltas:
        acc.add(delta)
        assert acc.snapshot_json() == dumps(acc.snapshot())
        assert json.loads(acc.snapshot_json(3)) == {**json.loads(dumps(acc.snapshot())), "index": 3}
    assert json.loads(acc.snapshot_json())["text"] == 'a "quoted"\n\\ é\t\u0001 😀'


def test_choice_layout_maps_sample_major_sequences_to_prompt_major_choices() -> None:
    layout = ChoiceLayout(num_prompts=2, n=3)  # sequences: p0s0 p1s0 p0s1 p1s1 p0s2 p1s2
    assert [layout.choice_of(s) for s in range(6)] == [0, 3, 1, 4, 2, 5]
    assert [layout.prompt_of(s) for s in range(6)] == [0, 1, 0, 1, 0, 1]
    metas = [{"prompt_tokens": 5, "completion_tokens": 2, "cached_tokens": 1}] * 6
    assert usage(metas, layout) == {
        "prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22, "prompt_tokens_details": {"cached_tokens": 2},
    }  # fmt: skip


def test_response_ids_name_the_engine_requests() -> None:
    ids = ResponseIds("chatcmpl")
    assert ids.response_id.startswith("chatcmpl-")
    assert ids.request_ids(1) == [ids.response_id]
    assert ids.request_ids(2) == [f"{ids.response_id}-0", f"{ids.response_id}-1"]
    assert ResponseIds("cmpl", rid="mine").request_ids(2) == ["mine-0", "mine-1"]


def test_json_output_has_no_nan_or_infinity() -> None:
    payload = {"a": float("nan"), "b": [float("-inf"), 1.5], "c": "é"}
    assert json.loads(dumps(payload)) == {"a": None, "b": [None, 1.5], "c": "é"}
    assert "é".encode() in dumps(payload)


@pytest.mark.parametrize(
    "kwargs",
    [{"api_key": ""}, {"max_body_bytes": 10}, {"max_sequences_per_request": 0}, {"health_timeout_s": 0}],
)
def test_settings_are_validated(kwargs: dict) -> None:
    with pytest.raises(EngineConfigError):
        ServerSettings(**kwargs)


class _FakeEngine:
    """Just enough engine for routes that do not generate."""

    served_model_name = "fake"
    model_path = "/models/fake"
    context_len = 128
    is_alive = True


def test_health_is_503_while_shutting_down_and_auth_is_constant_time_bearer() -> None:
    from sglr.server import build_app

    app = build_app(_FakeEngine(), ServerSettings(api_key="k"))  # type: ignore[arg-type]
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/v1/models").status_code == 401
        assert (
            client.get("/v1/models", headers={"Authorization": "Bearer k"}).json()["data"][0]["id"] == "fake"
        )
        assert client.get("/v1/models", headers={"Authorization": "Bearer k "}).status_code == 200
        assert client.get("/v1/models", headers={"Authorization": "Bearer kk"}).status_code == 401
        app.state.sglr.shutting_down = True
        assert client.get("/health").status_code == 503
        assert client.get("/health_generate").status_code == 503


def _counter_values(counter) -> dict[str, float]:
    """finish_reason (or "") -> value, of a counter's `_total` samples."""
    [family] = counter.collect()
    return {s.labels.get("finish_reason", ""): s.value for s in family.samples if s.name.endswith("_total")}


def test_a_sequence_counts_once_whether_it_ends_or_its_generation_is_closed_first() -> None:
    metrics = ServerMetrics(_FakeEngine(), "fake")  # type: ignore[arg-type]
    meta = {"prompt_tokens": 4, "completion_tokens": 2, "cached_tokens": 1}
    ended, cut_short, never_started = (
        SequenceMetrics(metrics),
        SequenceMetrics(metrics),
        SequenceMetrics(metrics, 7),
    )
    ended.on_delta({"output_ids": [5, 6], "meta_info": {**meta, "finish_reason": {"type": "length"}}})
    cut_short.on_delta(
        {"output_ids": [5], "meta_info": {**meta, "completion_tokens": 1, "finish_reason": None}}
    )
    for sequence in (ended, cut_short, never_started):  # the generation closes: twice is harmless
        sequence.on_close()
        sequence.on_close()
    assert _counter_values(metrics.num_requests) == {"length": 1, "abort": 2}
    # The third got no delta: its prompt length came from the front's tokenization.
    assert _counter_values(metrics.prompt_tokens) == {"": 4 + 4 + 7}
    assert _counter_values(metrics.generation_tokens) == {"": 3}
    assert _counter_values(metrics.cached_tokens) == {"": 2}


def test_engine_field_names_become_the_ones_the_request_used() -> None:
    openai_names = ParamNames({"max_new_tokens": "max_completion_tokens", "json_schema": "response_format"})
    assert openai_names.client_name("sampling_params.max_new_tokens") == "max_completion_tokens"
    assert openai_names.client_name("sampling_params.json_schema") == "response_format"
    assert openai_names.client_name("sampling_params.temperature") == "temperature"
    # A part of a field follows the field's name.
    tag_names = ParamNames({"structural_tag": "response_format"})
    assert (
        tag_names.client_name("sampling_params.structural_tag.triggers[1]") == "response_format.triggers[1]"
    )
    assert tag_names.client_name("sampling_params.structural_tag") == "response_format"
    assert (
        ENGINE_NAMES.client_name("sampling_params.structural_tag.format")
        == "sampling_params.structural_tag.format"
    )
    assert openai_names.client_name("input_ids") == "input_ids" and openai_names.client_name(None) is None
    chat_names = ParamNames({}, prompt="messages")
    assert chat_names.client_name("text") == chat_names.client_name("input_ids") == "messages"
    assert chat_names.client_name("sampling_params.n") == "n"
    assert ENGINE_NAMES.client_name("sampling_params.regex") == "sampling_params.regex"
