"""The fused CPU decode step (`sglr.model.cpu_fused_decode`, rust/kernels' decode) on fully 4-bit
tiny GGUF models: which models take it (by their layers: each family's), its logits against the
exact fp32 dequantized path (teacher-forced, so one step's error cannot change the next step's
input), its greedy tokens against the layered path's, batched steps equal to unbatched ones bit for
bit, the K/V it writes, and bad input refused before anything is written."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf_testing import ALL_4BIT, TinySpec, write_tiny_gguf

from sglr.engine.offline import generate_token_ids
from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_families import write_family_checkpoint
from sglr.testing.tiny_gguf import write_quantized_gguf

EMPTY = np.zeros(0, dtype=np.int64)


def _runner(path, **kwargs) -> ModelRunner:
    return ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=512, max_num_reqs=4, **kwargs))


def _tiny(gguf_cache, architecture="llama", seed=3):
    spec = TinySpec(architecture=architecture, tensor_types=ALL_4BIT, intermediate_size=128)
    path = gguf_cache / f"{architecture}.gguf"
    write_tiny_gguf(path, spec, seed=seed)
    return path


def _teacher_forced_logits(runner: ModelRunner, prompt: list[int], forced: list[int]) -> torch.Tensor:
    """Prefill `prompt` in row 1, then one decode step per forced token: each step's logits."""
    n = len(prompt)
    runner.forward_extend([ExtendRequest(1, np.array(prompt), EMPTY, np.arange(1, n + 1))])
    logits = []
    for i, token in enumerate(forced):
        seq_len = n + i + 1
        out = runner.forward_decode([1], [token], [seq_len], [seq_len])
        logits.append(out.next_token_logits[0].clone())
    return torch.stack(logits)


def test_which_runners_take_the_fused_step(gguf_cache, monkeypatch):
    path = _tiny(gguf_cache)
    assert _runner(path, gguf_weights="quantized").fused_decode is not None
    assert _runner(path, gguf_weights="dequantized").fused_decode is None
    monkeypatch.setenv("SGLR_CPU_FUSED_DECODE", "0")
    assert _runner(path, gguf_weights="quantized").fused_decode is None


def _family_gguf(gguf_cache, family):
    """A Q4_0 GGUF file of `family`'s tiny checkpoint."""
    hf_dir = (
        write_family_checkpoint(gguf_cache / "hf", family) if family == "qwen3" else tiny_model_path(family)
    )
    return write_quantized_gguf(hf_dir, gguf_cache / f"{family}.gguf", "Q4_0")


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_each_dense_family_takes_the_fused_step_by_its_layers(gguf_cache, monkeypatch, family):
    """Llama, Qwen2 (q/k/v biases) and Qwen3 (per-head q/k norms) layers take the fused step;
    Llama and Qwen2 generate the layered path's greedy tokens (Qwen3's tiny random model has
    near-ties that int8 activations may flip: its accuracy is checked on logits below)."""
    path = _family_gguf(gguf_cache, family)
    runner = _runner(path, gguf_weights="quantized")
    assert runner.weights_format == "quantized"
    assert runner.fused_decode is not None
    if family == "qwen3":
        return
    prompts = [np.random.default_rng(4).integers(3, 4000, size=n).tolist() for n in (9, 26)]
    tokens = generate_token_ids(runner, prompts, 16)
    monkeypatch.setenv("SGLR_CPU_FUSED_DECODE", "0")
    assert generate_token_ids(_runner(path, gguf_weights="quantized"), prompts, 16) == tokens


def test_a_layer_it_cannot_run_keeps_the_layered_path_with_the_reason_logged(gguf_cache, caplog):
    spec = TinySpec(
        tensor_types={**ALL_4BIT, "ffn_down.weight": GGMLQuantizationType.F16}, intermediate_size=128
    )
    path = gguf_cache / "f16-down.gguf"
    write_tiny_gguf(path, spec, seed=3)
    with caplog.at_level(logging.INFO, logger="sglr.model.cpu_fused_decode"):
        runner = _runner(path, gguf_weights="quantized")
    assert runner.fused_decode is None
    assert "layer 0: down_proj is not kept quantized" in caplog.text


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_fused_logits_match_the_exact_path_as_closely_as_the_layered_one(gguf_cache, monkeypatch, family):
    """Qwen2 adds q/k/v biases, Qwen3 per-head q/k norms. The fused step's error against fp32
    dequantized weights stays within the layered 4-bit path's (bf16 activations there, int8
    activations here) plus a margin; a wrong rotary, norm, KV slot or residual would be off by
    the logits' own size."""
    path = _tiny(gguf_cache, family) if family != "qwen3" else _family_gguf(gguf_cache, family)
    rng = np.random.default_rng(1)
    prompt = rng.integers(3, 200, size=23).tolist()
    forced = rng.integers(3, 200, size=6).tolist()
    fused_runner = _runner(path, gguf_weights="quantized")
    assert fused_runner.fused_decode is not None
    fused = _teacher_forced_logits(fused_runner, prompt, forced)
    exact = _teacher_forced_logits(_runner(path, dtype="float32"), prompt, forced)
    monkeypatch.setenv("SGLR_CPU_FUSED_DECODE", "0")
    layered = _teacher_forced_logits(_runner(path, gguf_weights="quantized"), prompt, forced)
    fused_error = (fused - exact).abs().amax(-1)
    layered_error = (layered - exact).abs().amax(-1)
    assert (fused_error <= 2 * layered_error + 0.3).all(), (fused_error, layered_error)
    assert fused_error.max() < 0.15 * exact.abs().max()


def test_batched_steps_equal_unbatched_steps_exactly(gguf_cache):
    """Each request's quantization, dot products and attention are its own: a batch of three
    requests at different lengths gives each one's logits and K/V bit for bit as alone."""
    runner = _runner(_tiny(gguf_cache), gguf_weights="quantized")
    rng = np.random.default_rng(2)
    lengths, starts = [5, 19, 40], [1, 101, 201]
    for row, (n, start) in enumerate(zip(lengths, starts, strict=True), start=1):
        prompt = rng.integers(3, 200, size=n)
        runner.forward_extend([ExtendRequest(row, prompt, EMPTY, np.arange(start, start + n))])
    rows = [1, 2, 3]
    tokens = [7, 8, 9]
    seq_lens = [n + 1 for n in lengths]
    slots = [start + n for n, start in zip(lengths, starts, strict=True)]
    batched = runner.forward_decode(rows, tokens, seq_lens, slots).next_token_logits.clone()
    keys_batched = runner.kv_cache.k_buffer[:, slots].clone()
    for i in range(3):
        alone = runner.forward_decode([rows[i]], [tokens[i]], [seq_lens[i]], [slots[i]])
        torch.testing.assert_close(alone.next_token_logits[0], batched[i], rtol=0, atol=0)
    torch.testing.assert_close(runner.kv_cache.k_buffer[:, slots], keys_batched, rtol=0, atol=0)


def test_written_keys_and_values_match_the_layered_path(gguf_cache, monkeypatch):
    path = _tiny(gguf_cache)
    prompt = list(range(3, 30))
    caches = []
    for fused in ("1", "0"):
        monkeypatch.setenv("SGLR_CPU_FUSED_DECODE", fused)
        runner = _runner(path, gguf_weights="quantized")
        _teacher_forced_logits(runner, prompt, [5, 6])
        slots = [len(prompt) + 1, len(prompt) + 2]
        caches.append(
            (runner.kv_cache.k_buffer[:, slots].float(), runner.kv_cache.v_buffer[:, slots].float())
        )
    for fused, layered in zip(caches[0], caches[1], strict=True):
        assert fused.abs().max() > 0
        torch.testing.assert_close(fused, layered, rtol=0.05, atol=0.05 * layered.abs().max().item())


def test_bad_steps_are_refused_before_writing(gguf_cache):
    runner = _runner(_tiny(gguf_cache), gguf_weights="quantized")
    fused = runner.fused_decode
    model = fused._model
    runner.forward_extend([ExtendRequest(1, np.arange(3, 8), EMPTY, np.arange(1, 6))])
    before = runner.kv_cache.k_buffer.clone()
    hidden = np.zeros((1, runner.config.hidden_size), dtype=np.float32)
    out = np.empty((1, model.output_width), dtype=np.float32)
    table = np.arange(1, 7, dtype=np.int32)[None, :]
    for positions, seq_lens, out_slots, match in (
        ([5], [6], [10_000], "slot"),
        ([5], [7], [6], "sequence length"),
        ([10**7], [6], [6], "position"),
    ):
        with pytest.raises(ValueError, match=match):
            model.step(hidden, positions, table, seq_lens, out_slots, fused._k_cache, fused._v_cache, out)
    with pytest.raises(ValueError, match="out"):
        model.step(hidden, [5], table, [6], [6], fused._k_cache, fused._v_cache, out[:, :3])
    torch.testing.assert_close(runner.kv_cache.k_buffer, before, rtol=0, atol=0)
