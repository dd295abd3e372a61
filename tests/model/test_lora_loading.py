"""Adapters sglr refuses at load (a `LoraAdapterError` naming what is wrong, before anything
serves them), unknown adapter names at request time, and the runner's adapter set
(`ModelLoras.check_invariants` after each load and unload)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from sglr.engine.engine import Engine
from sglr.errors import BatchError, EngineConfigError, LoraAdapterError, ModelConfigError, UnknownLoraError
from sglr.model.config import load_model_config
from sglr.model.forward_batch import ExtendRequest
from sglr.model.lora.peft_loader import load_peft_adapter
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_lora import write_peft_adapter

WEIGHTS = "adapter_model.safetensors"


@pytest.fixture(scope="module")
def base() -> Path:
    return tiny_model_path("llama")


@pytest.fixture(scope="module")
def good(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_peft_adapter(
        base, tmp_path_factory.mktemp("good") / "a", rank=8, target_modules=("q_proj", "down_proj")
    )


def copy_of(adapter: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(adapter, tmp_path / "copy"))


def edit_config(adapter: Path, **changes) -> None:
    path = adapter / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def edit_tensors(adapter: Path, edit) -> None:
    tensors = load_file(str(adapter / WEIGHTS))
    save_file(edit(dict(tensors)), str(adapter / WEIGHTS))


def refused(base: Path, adapter: Path, match: str, **limits) -> None:
    with pytest.raises(LoraAdapterError, match=match):
        load_peft_adapter("bad", adapter, load_model_config(base), **limits)


def test_a_good_adapter_loads_with_its_rank_and_projections(base: Path, good: Path) -> None:
    adapter = load_peft_adapter("good", good, load_model_config(base))
    assert (adapter.rank, adapter.projections) == (8, ("q_proj", "down_proj"))
    assert {key[1] for key in adapter.weights} == {"q_proj", "down_proj"}


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"use_dora": True}, "DoRA"),
        ({"peft_type": "PREFIX_TUNING"}, "only LORA"),
        ({"bias": "all"}, "biases"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save"),
        ({"fan_in_fan_out": True}, "fan_in_fan_out"),
    ],
)
def test_unsupported_options_are_refused(base: Path, good: Path, tmp_path: Path, changes, match: str) -> None:
    adapter = copy_of(good, tmp_path)
    edit_config(adapter, **changes)
    refused(base, adapter, match)


def test_embedding_and_head_adapters_are_refused(base: Path, tmp_path: Path) -> None:
    embed = write_peft_adapter(base, tmp_path / "embed", target_modules=("embed_tokens",))
    refused(base, embed, "embedding adapters")
    head = write_peft_adapter(base, tmp_path / "head", target_modules=("lm_head",))
    refused(base, head, "lm_head: adapters of this module are not supported")


def test_limits_of_the_server_are_enforced(base: Path, good: Path) -> None:
    refused(base, good, "rank 8 is over max_lora_rank 4", max_rank=4)
    refused(
        base, good, "adapts only q_proj, v_proj .* not down_proj", allowed_projections=("q_proj", "v_proj")
    )


def test_an_adapter_of_another_base_does_not_fit(base: Path, tmp_path: Path) -> None:
    other = tiny_model_path("llama", hidden_size=128)
    adapter = write_peft_adapter(other, tmp_path / "other", target_modules=("q_proj",))
    refused(
        base, adapter, r"layers.0.q_proj: lora_A \(8, 128\) .* do not fit the base projection \(64 x 64\)"
    )


def test_damaged_weights_are_refused(base: Path, good: Path, tmp_path: Path) -> None:
    adapter = copy_of(good, tmp_path)
    b_key = next(k for k in load_file(str(adapter / WEIGHTS)) if "lora_B" in k)
    edit_tensors(adapter, lambda t: {k: v for k, v in t.items() if k != b_key})
    refused(base, adapter, "has no lora_B weight")
    edit_tensors(adapter, lambda t: {**t, "base_model.model.model.layers.0.mystery.weight": torch.zeros(2)})
    refused(base, adapter, "mystery.weight: not a LoRA weight")
    tower = "base_model.model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.lora_A.weight"
    edit_tensors(adapter, lambda t: {**t, tower: torch.zeros(8, 64)})  # a LLaVA's image side
    refused(base, adapter, "image tower or projector are not supported")
    (adapter / WEIGHTS).write_bytes(b"not safetensors")
    refused(base, adapter, "not readable")
    (adapter / WEIGHTS).unlink()
    refused(base, adapter, "no adapter_model.safetensors or adapter_model.bin")
    (adapter / "adapter_config.json").unlink()
    refused(base, adapter, "no adapter_config.json")


def test_engine_start_refuses_a_bad_adapter_and_bad_options(base: Path, good: Path, tmp_path: Path) -> None:
    bad = copy_of(good, tmp_path)
    edit_config(bad, use_dora=True)
    with pytest.raises(LoraAdapterError, match="DoRA"):
        Engine(str(base), device="cpu", max_total_tokens=1024, lora_paths=[f"bad={bad}"])
    with pytest.raises(EngineConfigError, match="given twice"):
        Engine(str(base), device="cpu", lora_paths=[f"a={good}", f"a={good}"])
    with pytest.raises(EngineConfigError, match="over max_loaded_loras=1"):
        Engine(str(base), device="cpu", lora_paths=[f"a={good}", f"b={good}"], max_loaded_loras=1)
    with pytest.raises(ModelConfigError, match="not adaptable"):
        RunnerConfig(base, enable_lora=True, lora_target_modules=("embed_tokens",))


def test_unknown_adapter_names_are_refused_never_served_by_the_base(base: Path, good: Path) -> None:
    with Engine(str(base), device="cpu", max_total_tokens=1024, lora_paths=[f"good={good}"]) as eng:
        with pytest.raises(UnknownLoraError, match=r"'missing' is not loaded \(loaded: good\)") as info:
            eng.generate("hello", {"max_new_tokens": 2}, lora_path="missing")
        assert info.value.param == "lora_path"
        with pytest.raises(UnknownLoraError):  # one bad name rejects the whole batch
            eng.generate(["a", "b"], {"max_new_tokens": 2}, lora_path=["good", "missing"])
        out = eng.generate("hello", {"max_new_tokens": 2, "ignore_eos": True}, lora_path="good")
        assert len(out["output_ids"]) == 2  # the refusals left the engine serving
    with (
        Engine(str(base), device="cpu", max_total_tokens=1024) as plain,
        pytest.raises(UnknownLoraError, match="serves no adapters"),
    ):
        plain.generate("hello", {"max_new_tokens": 2}, lora_path="good")


def test_runner_adapter_set_load_and_unload(base: Path, good: Path, tmp_path: Path) -> None:
    other = write_peft_adapter(base, tmp_path / "other", rank=4, target_modules=("k_proj", "o_proj"), seed=7)
    runner = ModelRunner(
        RunnerConfig(base, device="cpu", kv_num_tokens=512, max_num_reqs=4, enable_lora=True)
    )
    loras = runner.loras
    assert loras is not None
    loras.check_invariants()
    runner.load_lora(1, "good", str(good))
    loras.check_invariants()
    runner.load_lora(2, "other", str(other))
    loras.check_invariants()
    with pytest.raises(LoraAdapterError, match="id 2 is taken"):
        runner.load_lora(2, "again", str(other))
    runner.unload_lora(1)
    loras.check_invariants()
    assert sorted(loras.adapters) == [2]
    request = ExtendRequest(1, torch.arange(3, 8).numpy(), torch.zeros(0, dtype=torch.int64).numpy(),
                            torch.arange(1, 6).numpy(), lora_id=1)  # fmt: skip
    with pytest.raises(BatchError, match=r"adapter ids \[1\] are not loaded"):
        runner.forward_extend([request])
