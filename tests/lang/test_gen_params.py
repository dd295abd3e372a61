"""GenParams (the options of one `gen`) and the requests backends build from them: SGLang's dtype
regexes, the native request fields, the engine's `SamplingParams`, and run-level defaults."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import sglr.lang
from sglr.errors import InvalidRequestError
from sglr.lang.backend.engine_backend import engine_sampling_params
from sglr.lang.backend.request_params import native_logprob_fields, native_sampling_params
from sglr.lang.gen_params import GenParams, batch_run_params, split_run_kwargs
from sglr.lang.ir import REGEX_BOOL, REGEX_FLOAT, REGEX_INT, REGEX_STR
from sglr.sampling_params import TOP_K_ALL, SamplingParams


def test_sglang_regex_constants_come_from_the_ir_module_with_sglang_values():
    # The patterns of SGLang's `python/sglang/lang/ir.py`.
    assert REGEX_INT == r"[-+]?[0-9]+[ \n]*"
    assert REGEX_FLOAT == r"[-+]?[0-9]*\.?[0-9]+[ \n]*"
    assert REGEX_BOOL == r"(True|False)"
    assert REGEX_STR == r"\"[\w\d\s]*\""
    # dtype=... constrains with the same constants.
    assert GenParams(dtype=int).regex_and_stop() == (REGEX_INT, (" ", "\n"))
    assert GenParams(dtype="float", stop=("\n", ";")).regex_and_stop() == (REGEX_FLOAT, ("\n", ";", " "))
    assert GenParams(dtype=str).regex_and_stop() == (REGEX_STR, ())
    assert GenParams(regex="a+", stop=("x",)).regex_and_stop() == ("a+", ("x",))


def test_the_only_sampling_params_class_is_the_engine_one():
    for module_info in pkgutil.walk_packages(sglr.lang.__path__, "sglr.lang."):
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__name__ == "SamplingParams":
                assert value is SamplingParams, module_info.name


def test_native_fields_lower_dtype_and_keep_logprob_keys_at_request_level():
    params = GenParams(max_new_tokens=9, dtype=bool, return_logprob=True, top_logprobs_num=2)
    fields = native_sampling_params(params)
    assert fields["regex"] == REGEX_BOOL and fields["max_new_tokens"] == 9
    assert fields["skip_special_tokens"] is fields["spaces_between_special_tokens"] is True
    assert not {"dtype", "return_logprob", "top_logprobs_num", "extra"} & set(fields)
    assert native_logprob_fields(params) == {"return_logprob": True, "top_logprobs_num": 2}


def test_the_engine_gets_its_own_sampling_params_type():
    params = GenParams(max_new_tokens=7, stop=("x",), stop_token_ids=(3,), temperature=0.0, dtype="int")
    converted = engine_sampling_params(params)
    assert type(converted) is SamplingParams
    assert (converted.max_new_tokens, converted.regex) == (7, REGEX_INT)
    assert converted.stop == ("x", " ", "\n")
    assert converted.stop_token_ids == frozenset({3})
    assert converted.is_greedy  # temperature 0 reads as greedy, as over HTTP
    coerced = engine_sampling_params(GenParams(top_k=-1, max_new_tokens=4.0))
    assert (coerced.top_k, coerced.max_new_tokens, type(coerced.max_new_tokens)) == (TOP_K_ALL, 4, int)
    with pytest.raises(InvalidRequestError) as raised:
        engine_sampling_params(GenParams(stop_regex=("(",)))
    assert raised.value.param == "sampling_params.stop_regex"


def test_run_keywords_split_into_defaults_and_program_arguments():
    params, arguments = split_run_kwargs({"max_tokens": 5, "temperature": 0.5, "topic": "cats"})
    assert params == GenParams(max_new_tokens=5, temperature=0.5)
    assert arguments == {"topic": "cats"}
    assert split_run_kwargs({"max_tokens": 5, "max_new_tokens": 6})[0].max_new_tokens == 6
    assert batch_run_params({"top_p": 0.5}) == GenParams(top_p=0.5)
    with pytest.raises(TypeError, match=r"run_batch\(\) got unexpected keyword arguments \['topic'\]"):
        batch_run_params({"topic": "cats"})


def test_tools_and_tool_choice_are_checked_and_kept_as_json():
    import json

    from sglr.lang.gen_params import GenParams

    tools = [{"type": "function", "function": {"name": "f"}}]
    params = GenParams(tools=tools, tool_choice="required")
    assert params.tools_list == tools and params.tool_choice_value == "required"
    named = {"type": "function", "function": {"name": "f"}}
    assert (
        GenParams().merged(tools=json.dumps(tools), tool_choice=json.dumps(named)).tool_choice_value == named
    )
    with pytest.raises(ValueError, match="tools must be"):
        GenParams(tools=[{"name": "f"}])
    with pytest.raises(ValueError, match="tool_choice needs tools"):
        GenParams(tool_choice="required")
    with pytest.raises(ValueError, match="tool_choice must be"):
        GenParams(tools=tools, tool_choice=json.dumps("sometimes"))
