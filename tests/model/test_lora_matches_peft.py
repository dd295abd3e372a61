"""LoRA adapters against `transformers` + `peft` on tiny Llama, Qwen2 and Phi-3 checkpoints with
random adapters that `peft` writes: greedy tokens identical for each adapter alone and for a
batch mixing the base model with three adapters of different ranks, target modules and scalings
(rsLoRA included), through chunked prefill and prefix-cache hits; the prefix cache is kept apart
per adapter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dense_families import write_family_checkpoint

from sglr.engine.engine import Engine
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_lora import peft_greedy, write_peft_adapter

NUM_NEW = 10
GREEDY = {"max_new_tokens": NUM_NEW, "temperature": 0, "ignore_eos": True}
ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@pytest.fixture(scope="module")
def adapters(tiny_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp(f"lora-{tiny_path.name}")
    return {
        "attn4": write_peft_adapter(tiny_path, out / "attn4", rank=4, target_modules=("q_proj", "v_proj"), seed=1),
        "mlp16": write_peft_adapter(
            tiny_path, out / "mlp16", rank=16, target_modules=("o_proj", "gate_proj", "up_proj", "down_proj"),
            seed=2, use_rslora=True,
        ),
        "all8": write_peft_adapter(tiny_path, out / "all8", rank=8, target_modules=ALL_PROJECTIONS, seed=3, lora_alpha=4),
    }  # fmt: skip


@pytest.fixture(scope="module")
def engine(tiny_path: Path, adapters: dict[str, Path]):
    eng = Engine(
        str(tiny_path),
        device="cpu",
        max_total_tokens=8192,
        chunked_prefill_size=16,
        debug_invariants=True,
        lora_paths=[f"{name}={path}" for name, path in adapters.items()],
    )
    yield eng
    eng.shutdown()


def prompts(seed: int, lengths: list[int], vocab_size: int = 4000) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(3, vocab_size, size=n).tolist() for n in lengths]


def test_each_adapter_alone_matches_peft(engine: Engine, tiny_path: Path, adapters: dict[str, Path]) -> None:
    prompt = prompts(0, [23])[0]
    base_tokens = peft_greedy(tiny_path, None, prompt, NUM_NEW)
    for name, path in adapters.items():
        out = engine.generate(input_ids=prompt, sampling_params=GREEDY, lora_path=name)
        expected = peft_greedy(tiny_path, path, prompt, NUM_NEW)
        assert out["output_ids"] == expected, name
        assert expected != base_tokens, f"{name} changes nothing: the test would not see a missed delta"
    assert engine.generate(input_ids=prompt, sampling_params=GREEDY)["output_ids"] == base_tokens


def test_mixed_batch_matches_peft_through_chunks_and_cache_hits(
    engine: Engine, tiny_path: Path, adapters: dict[str, Path]
) -> None:
    batch = prompts(1, [40, 9, 33, 21, 17, 3])  # prompts over 16 tokens prefill in chunks
    names = [None, "attn4", "mlp16", "all8", "attn4", None]
    expected = [
        peft_greedy(tiny_path, adapters[n] if n else None, p, NUM_NEW)
        for p, n in zip(batch, names, strict=True)
    ]
    for round_index in range(2):  # the second round starts from the first's cached prompts
        outs = engine.generate(input_ids=batch, sampling_params=GREEDY, lora_path=names)
        assert [o["output_ids"] for o in outs] == expected
        cached = [o["meta_info"]["cached_tokens"] for o in outs]
        if round_index == 1:
            assert all(c > 0 for c, p in zip(cached, batch, strict=True) if len(p) > 1)
    engine.check_invariants()


def test_prefix_cache_is_kept_apart_per_adapter(engine: Engine) -> None:
    prompt = prompts(2, [30])[0]
    params = {**GREEDY, "max_new_tokens": 2}
    order = ["attn4", "mlp16", None, "all8", "attn4"]
    cached = [
        engine.generate(input_ids=prompt, sampling_params=params, lora_path=name)["meta_info"][
            "cached_tokens"
        ]
        for name in order
    ]
    assert cached[:4] == [0, 0, 0, 0]  # each adapter's first run computes the whole prompt
    assert cached[4] == len(prompt) - 1 or cached[4] >= 16  # attn4's second run reuses its own


def test_fused_qkv_and_gate_up_adapters_match_peft(tmp_path: Path) -> None:
    """Phi-3 checkpoints fuse q/k/v and gate/up: adapters of the fused projections."""
    base = write_family_checkpoint(tmp_path / "phi3", "phi3", seed=4)
    adapter = write_peft_adapter(
        base, tmp_path / "fused", rank=8, target_modules=("qkv_proj", "gate_up_proj"), seed=5
    )
    prompt = prompts(3, [19], vocab_size=500)[0]
    with Engine(str(base), device="cpu", max_total_tokens=2048, lora_paths=[f"fused={adapter}"]) as eng:
        out = eng.generate(input_ids=prompt, sampling_params=GREEDY, lora_path="fused")
    expected = peft_greedy(base, adapter, prompt, NUM_NEW)
    assert out["output_ids"] == expected
    assert expected != peft_greedy(base, None, prompt, NUM_NEW)


def test_max_loras_per_batch_bounds_every_batch(tiny_path: Path, adapters: dict[str, Path]) -> None:
    """One adapter per batch: requests of the others wait their turn, then run, none lost."""
    batch = prompts(4, [12, 30, 7, 25, 18, 9, 14])
    names = ["attn4", "mlp16", None, "all8", "attn4", "mlp16", None]
    with Engine(
        str(tiny_path),
        device="cpu",
        max_total_tokens=8192,
        debug_invariants=True,
        max_loras_per_batch=1,
        lora_paths=[f"{name}={path}" for name, path in adapters.items()],
    ) as eng:
        loras = eng.runner.loras
        seen: list[set[int]] = []
        begin = loras.begin

        def recording_begin(token_ids):
            seen.append(set() if token_ids is None else {int(i) for i in token_ids} - {0})
            begin(token_ids)

        loras.begin = recording_begin
        outs = eng.generate(input_ids=batch, sampling_params=GREEDY, lora_path=names)
    expected = [
        peft_greedy(tiny_path, adapters[n] if n else None, p, NUM_NEW)
        for p, n in zip(batch, names, strict=True)
    ]
    assert [o["output_ids"] for o in outs] == expected
    assert max(len(ids) for ids in seen) == 1
    assert set().union(*seen) == {1, 2, 3}


def test_triton_backend_mixed_batch_matches_peft(tmp_path: Path) -> None:
    """The CUDA default, run here by Triton's interpreter (on Llama alone: it is slow): the
    adapters stacked by slot, one segmented kernel per linear, chunked prefill and decode."""
    base = tiny_model_path("llama")
    adapters = {
        "attn4": write_peft_adapter(
            base, tmp_path / "attn4", rank=4, target_modules=("q_proj", "v_proj"), seed=1
        ),
        "all8": write_peft_adapter(base, tmp_path / "all8", rank=8, target_modules=ALL_PROJECTIONS, seed=3),
    }
    batch = prompts(5, [21, 5, 12])
    names = ["all8", None, "attn4"]
    with Engine(
        str(base),
        device="cpu",
        max_total_tokens=4096,
        chunked_prefill_size=16,
        lora_backend="triton",
        lora_paths=[f"{name}={path}" for name, path in adapters.items()],
    ) as eng:
        assert eng.runner.loras.backend == "triton"
        outs = eng.generate(input_ids=batch, sampling_params={**GREEDY, "max_new_tokens": 6}, lora_path=names)
    expected = [
        peft_greedy(base, adapters[n] if n else None, p, 6) for p, n in zip(batch, names, strict=True)
    ]
    assert [o["output_ids"] for o in outs] == expected


@pytest.mark.gpu
def test_cuda_mixed_batch_matches_peft(tmp_path: Path) -> None:
    """On a GPU: the Triton backend (the default there) in fp32 against peft."""
    base = tiny_model_path("llama")
    adapter = write_peft_adapter(base, tmp_path / "all8", rank=8, target_modules=ALL_PROJECTIONS, seed=3)
    batch = prompts(6, [21, 9])
    with Engine(str(base), device="cuda", dtype="float32", lora_paths=[f"all8={adapter}"]) as eng:
        outs = eng.generate(input_ids=batch, sampling_params=GREEDY, lora_path=["all8", None])
    expected = [peft_greedy(base, adapter, batch[0], NUM_NEW), peft_greedy(base, None, batch[1], NUM_NEW)]
    assert [o["output_ids"] for o in outs] == expected
