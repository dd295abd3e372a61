"""LoRA adapters inside the fused CPU decode step (rust/kernels' decode/lora.rs) on a tiny 4-bit
GGUF Llama: a decode batch mixing the base model and two adapters (one on all seven projections,
one on q/v/down only) through the fused step is as close to the exact fp32 path with the same
adapters as the layered 4-bit path is (teacher-forced logits, the tolerance derived as in
test_cpu_fused_decode.py from the layered path's error measured here), its base row is bit for bit
a base-only fused step's, adapters follow loads and unloads, and the Engine's greedy tokens equal
the layered path's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sglr.engine.engine import Engine
from sglr.errors import BatchError
from sglr.model.config import load_model_config
from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_gguf import write_quantized_gguf
from sglr.testing.tiny_lora import write_random_adapter

EMPTY = np.zeros(0, dtype=np.int64)
ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Three requests in rows 1..3: the base model, adapter 1, adapter 2.
ROWS, LORA_IDS = [1, 2, 3], [0, 1, 2]
PROMPT_LENS, FIRST_SLOTS = [23, 9, 31], [1, 101, 201]


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    hf_dir = tiny_model_path("llama")
    out = tmp_path_factory.mktemp("fused-lora")
    path = write_quantized_gguf(hf_dir, out / "llama.gguf", "Q4_0")
    config = load_model_config(hf_dir)
    adapters = {
        "all4": write_random_adapter(config, out / "all4", rank=4, target_modules=ALL_PROJECTIONS, seed=1),
        "qvd8": write_random_adapter(
            config, out / "qvd8", rank=8, target_modules=("q_proj", "v_proj", "down_proj"), seed=2
        ),
    }
    return path, adapters


def _runner(path: Path, adapters: dict[str, Path], **kwargs) -> ModelRunner:
    loras = tuple((i, name, str(p)) for i, (name, p) in enumerate(adapters.items(), start=1))
    config = RunnerConfig(
        path, device="cpu", kv_num_tokens=512, max_num_reqs=4, enable_lora=True, lora_adapters=loras, **kwargs
    )
    return ModelRunner(config)


def _prefill(runner: ModelRunner, lora_ids: list[int]) -> None:
    rng = np.random.default_rng(5)
    for row, n, start, lora_id in zip(ROWS, PROMPT_LENS, FIRST_SLOTS, lora_ids, strict=True):
        prompt = rng.integers(3, 200, size=n)
        runner.forward_extend(
            [ExtendRequest(row, prompt, EMPTY, np.arange(start, start + n), lora_id=lora_id)]
        )


def _teacher_forced(runner: ModelRunner, lora_ids: list[int], num_steps: int = 5) -> torch.Tensor:
    """Logits `[steps, 3, vocab]` of the three requests decoded together on forced tokens."""
    _prefill(runner, lora_ids)
    forced = np.random.default_rng(6).integers(3, 200, size=(num_steps, 3))
    logits = []
    for step in range(num_steps):
        seq_lens = [n + step + 1 for n in PROMPT_LENS]
        slots = [start + n + step for n, start in zip(PROMPT_LENS, FIRST_SLOTS, strict=True)]
        out = runner.forward_decode(ROWS, forced[step], seq_lens, slots, lora_ids=lora_ids)
        logits.append(out.next_token_logits.clone())
    return torch.stack(logits)


def test_a_mixed_batch_is_as_close_to_the_exact_path_as_the_layered_one(model_files, monkeypatch):
    path, adapters = model_files
    fused_runner = _runner(path, adapters)
    assert fused_runner.fused_decode is not None and fused_runner.fused_decode._model.adapter_ids == [1, 2]
    fused = _teacher_forced(fused_runner, LORA_IDS)
    exact = _teacher_forced(_runner(path, adapters, dtype="float32"), LORA_IDS)
    exact_base = _teacher_forced(_runner(path, adapters, dtype="float32"), [0, 0, 0])
    monkeypatch.setenv("SGLR_CPU_FUSED_DECODE", "0")
    layered_runner = _runner(path, adapters)
    assert layered_runner.fused_decode is None
    layered = _teacher_forced(layered_runner, LORA_IDS)
    fused_error = (fused - exact).abs().amax(-1)  # [steps, request]
    layered_error = (layered - exact).abs().amax(-1)
    tolerance = 2 * layered_error + 0.3
    assert (fused_error <= tolerance).all(), (fused_error, layered_error)
    assert fused_error.max() < 0.15 * exact.abs().max()
    # The adapters move the logits well past the tolerance: a delta left out would fail above.
    adapter_effect = (exact - exact_base).abs().amax(-1)[:, 1:]
    assert (adapter_effect > 2 * tolerance[:, 1:]).all(), (adapter_effect, tolerance)


def test_base_rows_are_a_base_only_steps_bit_for_bit(model_files):
    """Each row is its own in the fused step: the base request's logits and K/V in the mixed batch
    are those of a step without adapters, and each adapter's row is as when decoded alone."""
    path, adapters = model_files
    runner = _runner(path, adapters)
    _prefill(runner, LORA_IDS)
    seq_lens = [n + 1 for n in PROMPT_LENS]
    slots = [start + n for n, start in zip(PROMPT_LENS, FIRST_SLOTS, strict=True)]
    tokens = [7, 8, 9]
    mixed = runner.forward_decode(ROWS, tokens, seq_lens, slots, lora_ids=LORA_IDS).next_token_logits.clone()
    kv_mixed = runner.kv_cache.k_buffer[:, slots].clone(), runner.kv_cache.v_buffer[:, slots].clone()
    base_only = runner.forward_decode(ROWS, tokens, seq_lens, slots).next_token_logits.clone()
    torch.testing.assert_close(base_only[0], mixed[0], rtol=0, atol=0)
    for i, lora_id in enumerate(LORA_IDS):
        alone = runner.forward_decode([ROWS[i]], [tokens[i]], [seq_lens[i]], [slots[i]], lora_ids=[lora_id])
        torch.testing.assert_close(alone.next_token_logits[0], mixed[i], rtol=0, atol=0)
        if lora_id:
            assert (base_only[i] - mixed[i]).abs().max() > 0.1, f"adapter {lora_id} changed nothing"
    runner.forward_decode(ROWS[:1], tokens[:1], seq_lens[:1], slots[:1])  # the base row's K/V again
    torch.testing.assert_close(runner.kv_cache.k_buffer[:, slots[0]], kv_mixed[0][:, 0], rtol=0, atol=0)
    torch.testing.assert_close(runner.kv_cache.v_buffer[:, slots[0]], kv_mixed[1][:, 0], rtol=0, atol=0)


def test_the_fused_step_follows_loads_and_unloads_and_refuses_unknown_ids(model_files):
    path, adapters = model_files
    runner = _runner(path, adapters)
    fused = runner.fused_decode
    runner.unload_lora(2)
    assert fused._model.adapter_ids == [1]
    runner.load_lora(5, "qvd8-again", str(adapters["qvd8"]))
    assert fused._model.adapter_ids == [1, 5]
    runner.loras.check_invariants()
    _prefill(runner, [0, 1, 5])
    before = runner.kv_cache.k_buffer.clone()
    with pytest.raises(BatchError, match=r"\[2\] are not loaded"):
        runner.forward_decode([1, 2], [5, 6], [24, 10], [24, 110], lora_ids=[0, 2])
    hidden = np.zeros((1, runner.config.hidden_size), dtype=np.float32)
    out = np.empty((1, fused._model.output_width), dtype=np.float32)
    table = np.arange(1, 25, dtype=np.int32)[None, :]
    with pytest.raises(ValueError, match="LoRA adapter 2 is not loaded"):
        fused._model.step(hidden, [23], table, [24], [24], fused._k_cache, fused._v_cache, out, np.array([2]))
    with pytest.raises(ValueError, match="adapter_ids"):
        fused._model.step(hidden, [23], table, [24], [24], fused._k_cache, fused._v_cache, out, [1, 1])
    torch.testing.assert_close(runner.kv_cache.k_buffer, before, rtol=0, atol=0)
    with pytest.raises(ValueError, match="is taken"):
        fused.add_adapter(1, runner.loras.packed_layers(1))


GREEDY = {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}


def _engine_tokens(path: Path, adapters: dict[str, Path], prompts, names):
    """Greedy tokens with the adapters `names` and with the base model, and the fused step."""
    engine = Engine(str(path), device="cpu", lora_paths=[f"{n}={p}" for n, p in adapters.items()])
    try:
        outs = engine.generate(input_ids=prompts, sampling_params=GREEDY, lora_path=names)
        base = engine.generate(input_ids=prompts, sampling_params=GREEDY)
        return [o["output_ids"] for o in outs], [o["output_ids"] for o in base], engine.runner.fused_decode
    finally:
        engine.shutdown()


def _next_logits(runner: ModelRunner, prompt: list[int], forced: list[int], lora_id: int) -> torch.Tensor:
    """The logits after `prompt + forced` (request row 1), the forced tokens decoded one by one."""
    n = len(prompt)
    out = runner.forward_extend(
        [ExtendRequest(1, np.array(prompt), EMPTY, np.arange(1, n + 1), lora_id=lora_id)]
    )
    logits = out.next_token_logits[0]
    for i, token in enumerate(forced):
        seq_len = n + i + 1
        logits = runner.forward_decode(
            [1], [token], [seq_len], [seq_len], lora_ids=[lora_id]
        ).next_token_logits[0]
    return logits.clone()


def _near_tie(path, adapters, monkeypatch, prompt, lora_id, fused: list[int], layered: list[int]) -> str:
    """Where the two greedy sequences part: the two tokens' exact fp32 logits (same adapter) must
    lie within what the two 4-bit paths' errors there allow (each path within its error of the
    exact logits, the token each picked can be off by twice the larger one). Returns what it saw."""
    first = next(i for i, (a, b) in enumerate(zip(fused, layered, strict=True)) if a != b)
    a, b = fused[first], layered[first]
    exact = _next_logits(_runner(path, adapters, dtype="float32"), prompt, fused[:first], lora_id)
    errors = []
    for flag in ("1", "0"):
        monkeypatch.setenv("SGLR_CPU_FUSED_DECODE", flag)
        errors.append(
            float((_next_logits(_runner(path, adapters), prompt, fused[:first], lora_id) - exact).abs().max())
        )
    margin = abs(float(exact[a] - exact[b]))
    seen = (
        f"token {first}: fused {a}, layered {b}; exact margin {margin:.4f}, errors (fused, layered) {errors}"
    )
    assert margin <= 2 * max(errors), seen
    return seen


def test_engine_greedy_tokens_equal_the_layered_paths(model_files, monkeypatch):
    """Equal greedy tokens, but for a near-tie the two paths' rounding may break (shown, and checked
    to be one against the exact logits)."""
    path, adapters = model_files
    rng = np.random.default_rng(8)
    prompts = [rng.integers(3, 4000, size=n).tolist() for n in (14, 5, 27, 9)]
    names = [None, "all4", "qvd8", "all4"]
    fused, base, fused_step = _engine_tokens(path, adapters, prompts, names)
    assert fused_step is not None
    monkeypatch.setenv("SGLR_CPU_FUSED_DECODE", "0")
    layered, _, layered_step = _engine_tokens(path, adapters, prompts, names)
    assert layered_step is None
    lora_ids = {None: 0, **{name: i for i, name in enumerate(adapters, start=1)}}
    ties = []
    for i, name in enumerate(names):
        assert (fused[i] != base[i]) == (name is not None), (name, fused[i], base[i])
        if fused[i] != layered[i]:
            ties.append(
                f"{name}: "
                + _near_tie(path, adapters, monkeypatch, prompts[i], lora_ids[name], fused[i], layered[i])
            )
    print("near-ties:", ties or "none")
    assert len(ties) < len(prompts), ties
