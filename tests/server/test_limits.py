"""The limits of `sglr.limits`: docs/server.md lists exactly its table with the flags, the flags
exist with those defaults, the settings refuse nonsense and the sampling limits are typed and
name their field. Served, one past each limit and one at it: `test_auth_and_limits.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglr import limits
from sglr.errors import EngineConfigError, SamplingLimitError
from sglr.sampling_params import SamplingParams
from sglr.server import ServerSettings
from sglr.server.launch import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "server.md"
LIMITS_HEADER = "| limit | default | flag | what |"


def doc_row(limit: limits.Limit) -> str:
    return f"| `{limit.name}` | {limits.describe(limit)} | {f'`{limit.flag}`' if limit.flag else 'fixed'} | {limit.what} |"


def test_docs_list_every_limit_with_its_flag() -> None:
    text = DOCS.read_text()
    table = text[text.index(LIMITS_HEADER) :].split("\n\n")[0].splitlines()[2:]
    assert table == [doc_row(limit) for limit in limits.TABLE]


def test_every_flagged_limit_is_a_server_flag_with_its_default() -> None:
    defaults = {
        action.option_strings[0]: action.default
        for action in build_parser()._actions
        if action.option_strings
    }
    for limit in limits.TABLE:
        if limit.flag is not None and limit.flag.startswith("--max-"):
            assert defaults[limit.flag] == limit.default, limit.name
    args = build_parser().parse_args(["--max-messages", "7", "--max-image-bytes", "2048"])
    assert (args.max_messages, args.max_image_bytes) == (7, 2048)


@pytest.mark.parametrize(
    "name", ["max_sequences_per_request", "max_messages", "max_tools", "max_tool_schema_bytes"]
)
def test_server_limits_must_be_positive(name: str) -> None:
    assert getattr(ServerSettings(**{name: 1}), name) == 1
    with pytest.raises(EngineConfigError, match=name):
        ServerSettings(**{name: 0})


def test_sampling_limits_are_typed_and_name_the_field() -> None:
    cases = [
        ({"stop": ["x" * limits.MAX_STOP_STRING_CHARS]}, None),
        ({"stop": ["x" * (limits.MAX_STOP_STRING_CHARS + 1)]}, ("stop", "max_stop_string_chars")),
        ({"stop": [f"s{i}" for i in range(limits.MAX_STOP_STRINGS + 1)]}, ("stop", "max_stop_strings")),
        ({"logit_bias": {str(i): 1.0 for i in range(limits.MAX_LOGIT_BIAS_ENTRIES)}}, None),
        ({"logit_bias": {str(i): 1.0 for i in range(limits.MAX_LOGIT_BIAS_ENTRIES + 1)}},
         ("logit_bias", "max_logit_bias_entries")),
        ({"stop_regex": "a" * (limits.MAX_STOP_REGEX_BYTES + 1)}, ("stop_regex", "max_stop_regex_bytes")),
    ]  # fmt: skip
    for raw, refused in cases:
        if refused is None:
            SamplingParams.from_dict(raw)
            continue
        with pytest.raises(SamplingLimitError) as caught:
            SamplingParams.from_dict(raw)
        assert (caught.value.param, caught.value.limit) == (f"sampling_params.{refused[0]}", refused[1])
