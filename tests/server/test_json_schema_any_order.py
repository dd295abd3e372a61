"""The any-order switch for JSON schemas from the outside: OpenAI routes read
`json_schema_any_order` as an extension field (a typed 400 naming it when it is not a
boolean), and `--json-schema-any-order` sets the engine's default."""

from __future__ import annotations

import pytest

from sglr.http.errors import ApiError
from sglr.server.launch import build_parser, engine_options
from sglr.server.openai.sampling import sampling_params


@pytest.mark.parametrize("value", [True, False])
def test_openai_extension_field_reaches_the_sampling_params(value: bool) -> None:
    sampling = sampling_params({"json_schema_any_order": value}, 16)
    assert sampling.params["json_schema_any_order"] is value
    assert "json_schema_any_order" not in sampling_params({}, 16).params


def test_openai_extension_field_must_be_a_boolean() -> None:
    with pytest.raises(ApiError) as excinfo:
        sampling_params({"json_schema_any_order": "yes"}, 16)
    assert excinfo.value.status == 400
    assert excinfo.value.param == "json_schema_any_order"


@pytest.mark.parametrize(("argv", "any_order"), [([], False), (["--json-schema-any-order"], True)])
def test_server_flag_sets_the_engine_default(argv: list[str], any_order: bool) -> None:
    assert engine_options(build_parser().parse_args(argv))["json_schema_any_order"] is any_order
