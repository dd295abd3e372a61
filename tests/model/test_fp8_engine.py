"""The engine end to end with `quantization="fp8"` and `kv_cache_dtype="fp8_e4m3"` on a tiny
checkpoint (and an FP8 checkpoint), greedy tokens against the runner-level reference that does
the same rounding with dense weights and a float cache; the options' refusals and flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from fp8_testing import cpu_runner, online_fp8_reference, round_activations, round_kv_through_fp8, sequence

from sglr.engine.config import EngineConfig
from sglr.engine.engine import Engine
from sglr.engine.offline import generate_token_ids as generate
from sglr.errors import EngineConfigError
from sglr.server.launch import build_parser, engine_options
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_fp8 import write_fp8_twins

_GREEDY = {"max_new_tokens": 10, "temperature": 0.0, "ignore_eos": True}


def _engine_ids(model_path: Path, prompts: list[list[int]], **options) -> list[list[int]]:
    with Engine(
        model_path=str(model_path), device="cpu", max_total_tokens=4096, debug_invariants=True, **options
    ) as engine:
        results = engine.generate(input_ids=prompts, sampling_params=_GREEDY)
    return [r["output_ids"] for r in results]


def test_engine_greedy_with_fp8_weights_and_fp8_kv() -> None:
    path = tiny_model_path("llama")
    prompts = [sequence(40, 12), sequence(41, 5), sequence(42, 20)]
    reference = round_kv_through_fp8(online_fp8_reference(path))
    expected = generate(reference, prompts, 10)
    assert _engine_ids(path, prompts, quantization="fp8", kv_cache_dtype="fp8_e4m3") == expected


def test_engine_greedy_on_an_fp8_checkpoint(tmp_path: Path) -> None:
    fp8_dir, dense_dir = write_fp8_twins(tiny_model_path("qwen2"), tmp_path, "block")
    prompts = [sequence(50, 9), sequence(51, 16)]
    reference = round_activations(cpu_runner(dense_dir), like=cpu_runner(fp8_dir))
    assert _engine_ids(fp8_dir, prompts) == generate(reference, prompts, 10)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"quantization": "int8"}, "quantization"),
        ({"quantization": "FP8"}, "quantization"),
        ({"kv_cache_dtype": "fp8_e5m2"}, "kv_cache_dtype"),
        ({"kv_cache_dtype": "fp8_e4m3", "enable_hierarchical_cache": True}, "hierarchical"),
    ],
)
def test_engine_refuses_unknown_or_conflicting_options(options: dict, message: str) -> None:
    with pytest.raises(EngineConfigError, match=message):
        EngineConfig(**options)


def test_server_flags_reach_the_engine_options() -> None:
    parser = build_parser()
    options = engine_options(parser.parse_args(["--quantization", "fp8", "--kv-cache-dtype", "fp8_e4m3"]))
    assert (options["quantization"], options["kv_cache_dtype"]) == ("fp8", "fp8_e4m3")
    defaults = engine_options(parser.parse_args([]))
    assert (defaults["quantization"], defaults["kv_cache_dtype"]) == (None, "auto")
    with pytest.raises(SystemExit):
        parser.parse_args(["--quantization", "awq"])
