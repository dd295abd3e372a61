"""Adapters loaded and unloaded while the engine runs: a loaded adapter serves `peft`'s tokens,
an adapter unloaded while a request uses it finishes that request first and refuses new ones,
a name loaded again with other weights gets a new id and never the old weights' cached KV, and
`max_loaded_loras` bounds how many are loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglr.errors import LoraAdapterError, LoraCapacityError, UnknownLoraError
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_lora import peft_greedy, write_peft_adapter

GREEDY = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}
PROMPT = list(range(40, 72))


@pytest.fixture(scope="module")
def base() -> Path:
    return tiny_model_path("llama")


@pytest.fixture(scope="module")
def adapters(base: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("runtime-lora")
    return {
        "first": write_peft_adapter(
            base, out / "first", rank=8, target_modules=("q_proj", "v_proj"), seed=11
        ),
        "second": write_peft_adapter(
            base, out / "second", rank=4, target_modules=("o_proj", "up_proj"), seed=12
        ),
    }


def test_load_serves_and_unload_refuses(base: Path, adapters: dict[str, Path], make_engine) -> None:
    engine = make_engine(base, enable_lora=True)
    assert engine.lora_adapters() == []
    ref = engine.load_lora_adapter("first", str(adapters["first"]))
    assert [r.name for r in engine.lora_adapters()] == ["first"]
    out = engine.generate(input_ids=PROMPT, sampling_params=GREEDY, lora_path="first")
    assert out["output_ids"] == peft_greedy(base, adapters["first"], PROMPT, GREEDY["max_new_tokens"])
    with pytest.raises(LoraAdapterError, match="already loaded"):
        engine.load_lora_adapter("first", str(adapters["second"]))
    engine.unload_lora_adapter("first")
    assert engine.lora_adapters() == []
    assert ref.lora_id not in engine.runner.loras.adapters
    with pytest.raises(UnknownLoraError, match="'first' is not loaded"):
        engine.generate(input_ids=PROMPT, sampling_params=GREEDY, lora_path="first")
    with pytest.raises(UnknownLoraError):
        engine.unload_lora_adapter("first")
    with pytest.raises(LoraAdapterError, match=r"no adapter_config\.json"):
        engine.load_lora_adapter("broken", str(base))
    assert engine.lora_adapters() == []  # a failed load leaves nothing behind
    engine.check_invariants()


def test_unload_while_in_use_waits_for_the_request(
    base: Path, adapters: dict[str, Path], make_engine
) -> None:
    engine = make_engine(base, lora_paths=[f"first={adapters['first']}"])
    lora_id = engine.lora_adapters()[0].lora_id
    params = {**GREEDY, "max_new_tokens": 1000}  # far from done while the test runs its steps
    stream = engine.generate(
        input_ids=PROMPT, sampling_params=params, lora_path="first", stream=True, rid="long"
    )
    chunks = [next(stream)]  # the request is running
    engine.unload_lora_adapter("first")
    assert lora_id in engine.runner.loras.adapters  # kept for the request that uses it
    with pytest.raises(UnknownLoraError):
        engine.generate(input_ids=PROMPT, sampling_params=GREEDY, lora_path="first")
    while sum(len(chunk["output_ids"]) for chunk in chunks) < 24:
        chunks.append(next(stream))
    engine.abort("long")
    chunks.extend(stream)
    output_ids = [token for chunk in chunks for token in chunk["output_ids"]]
    assert output_ids == peft_greedy(base, adapters["first"], PROMPT, len(output_ids))
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "abort"
    engine.check_invariants()  # on the loop thread, after the request ended
    assert lora_id not in engine.runner.loras.adapters


def test_reloaded_name_gets_new_weights_and_no_old_cache(
    base: Path, adapters: dict[str, Path], make_engine
) -> None:
    engine = make_engine(base, lora_paths=[f"tuned={adapters['first']}"])
    old_id = engine.lora_adapters()[0].lora_id
    first = engine.generate(input_ids=PROMPT, sampling_params=GREEDY, lora_path="tuned")
    again = engine.generate(input_ids=PROMPT, sampling_params=GREEDY, lora_path="tuned")
    assert again["meta_info"]["cached_tokens"] > 0
    engine.unload_lora_adapter("tuned")
    ref = engine.load_lora_adapter("tuned", str(adapters["second"]))
    assert ref.lora_id != old_id
    reloaded = engine.generate(input_ids=PROMPT, sampling_params=GREEDY, lora_path="tuned")
    assert reloaded["meta_info"]["cached_tokens"] == 0
    assert reloaded["output_ids"] == peft_greedy(base, adapters["second"], PROMPT, GREEDY["max_new_tokens"])
    assert reloaded["output_ids"] != first["output_ids"]


def test_max_loaded_loras_bounds_loads(base: Path, adapters: dict[str, Path], make_engine) -> None:
    engine = make_engine(base, lora_paths=[f"first={adapters['first']}"], max_loaded_loras=1)
    with pytest.raises(LoraCapacityError, match="max_loaded_loras"):
        engine.load_lora_adapter("second", str(adapters["second"]))
    engine.unload_lora_adapter("first")
    engine.load_lora_adapter("second", str(adapters["second"]))
    assert [r.name for r in engine.lora_adapters()] == ["second"]


def test_packed_adapters_are_bounded_and_least_recently_used_evicted(
    base: Path, adapters: dict[str, Path], tmp_path: Path, make_engine
) -> None:
    """Four adapters loaded, two packed on the runner at most (max_loras_per_batch): each use of
    an evicted one packs it again from its host copy, with peft's tokens every time."""
    more = {
        "third": write_peft_adapter(
            base, tmp_path / "third", rank=16, target_modules=("k_proj", "gate_proj"), seed=13
        ),
        "fourth": write_peft_adapter(
            base, tmp_path / "fourth", rank=2, target_modules=("down_proj",), seed=14
        ),
    }
    every = {**adapters, **more}
    engine = make_engine(base, lora_paths=[f"{n}={p}" for n, p in every.items()], max_loras_per_batch=2)
    lifecycle = engine._scheduler._loras
    assert len(engine.runner.loras.adapters) == 2  # the start's four, evicted down to the bound
    expected = {
        name: peft_greedy(base, path, PROMPT, GREEDY["max_new_tokens"]) for name, path in every.items()
    }
    order = ["first", "third", "second", "fourth", "first", "fourth", "third", "second"]
    for name in order:  # one at a time: each adapter's turn may evict the least recently used
        out = engine.generate(input_ids=PROMPT, sampling_params=GREEDY, lora_path=name)
        assert out["output_ids"] == expected[name], name
        assert len(engine.runner.loras.adapters) <= 2
    evictions = lifecycle.num_evictions
    assert evictions >= len(order) - 2
    outs = engine.generate(input_ids=[PROMPT] * 8, sampling_params=GREEDY, lora_path=order)  # all at once
    assert [o["output_ids"] for o in outs] == [expected[name] for name in order]
    assert lifecycle.num_evictions > evictions
    engine.check_invariants()
