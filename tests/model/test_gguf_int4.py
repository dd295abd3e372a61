"""GGUF Q4_0/Q4_1 matrices kept 4-bit (`RunnerConfig(gguf_weights="quantized")`): the blocks are
read exactly, the int4 kernel and its bf16 fallback compute the same product, and the model gives
the greedy tokens of the dequantized bf16 path with logits as close to the exact (fp32) ones as
that path's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import quants
from gguf_testing import T, TinySpec, write_tiny_gguf

from sglr.errors import ModelConfigError
from sglr.kernels.cpu_int4 import INT4_MAX_KERNEL_ROWS, dequantize_int4, int4_linear, pack_int4
from sglr.model.forward_batch import ExtendRequest
from sglr.model.gguf.int4_blocks import int4_groups
from sglr.model.gguf.reader import read_gguf
from sglr.model.layers import Linear
from sglr.model.runner import ModelRunner, RunnerConfig

ALL_INT4 = {
    "token_embd.weight": T.Q8_0,
    "attn_q.weight": T.Q4_0,
    "attn_k.weight": T.Q4_1,
    "attn_v.weight": T.Q4_1,
    "attn_output.weight": T.Q4_0,
    "ffn_gate.weight": T.Q4_0,
    "ffn_up.weight": T.Q4_1,
    "ffn_down.weight": T.Q4_1,
}


@pytest.fixture
def gguf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _runner(path, **kwargs) -> ModelRunner:
    return ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=512, max_num_reqs=4, **kwargs))


def test_blocks_read_as_int4_groups_equal_the_dequantized_values(tmp_path):
    write_tiny_gguf(tmp_path / "t.gguf", TinySpec(tensor_types=ALL_INT4))
    checkpoint = read_gguf(tmp_path / "t.gguf")
    seen = set()
    for tensor in checkpoint.tensors:
        if tensor.type_name not in ("Q4_0", "Q4_1"):
            continue
        seen.add(tensor.type_name)
        levels, scales, zeros = int4_groups(tensor)
        assert levels.dtype == np.uint8 and levels.max() <= 15
        values = (levels.reshape(*scales.shape, 32).astype(np.float32) - 8) * scales[..., None] + zeros[
            ..., None
        ]
        expected = quants.dequantize(tensor.data, tensor.ggml_type).reshape(tensor.shape)
        np.testing.assert_allclose(values.reshape(tensor.shape), expected, rtol=1e-6, atol=1e-7)
    assert seen == {"Q4_0", "Q4_1"}


@pytest.mark.parametrize("rows", [1, 5, INT4_MAX_KERNEL_ROWS + 3])
def test_int4_linear_matches_its_formula(rows):
    """The kernel (few rows) and the dequantize-then-GEMM path (many rows) against fp32 math on
    the stored (bf16) scales and zeros; `dequantize_int4` undoes the packed layout exactly."""
    gen = torch.Generator().manual_seed(0)
    n, k = 192, 96
    levels = torch.randint(0, 16, (n, k), generator=gen)
    scales = torch.rand(n, k // 32, generator=gen) * 0.02
    zeros = torch.randn(n, k // 32, generator=gen) * 0.02
    weight = pack_int4(levels, scales, zeros)
    expanded = [t.to(torch.bfloat16).float().repeat_interleave(32, dim=1) for t in (scales, zeros)]
    dense = (levels.float() - 8) * expanded[0] + expanded[1]
    torch.testing.assert_close(dequantize_int4(weight).float(), dense, rtol=2**-8, atol=0)
    x = torch.randn(rows, k, generator=gen).to(torch.bfloat16)
    y = int4_linear(x, weight)
    assert y.shape == (rows, n) and y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), x.float() @ dense.T, rtol=0.02, atol=0.02)


def test_only_all_int4_linears_go_int4(gguf_cache):
    """The default tiny spec mixes formats: q/k/v (Q8_0 v) and o (F16) and down (Q8_0) stay
    dense; gate/up (Q4_0 + Q4_1) goes int4 and holds no dense weight."""
    write_tiny_gguf(gguf_cache / "t.gguf", TinySpec(intermediate_size=128))
    runner = _runner(gguf_cache / "t.gguf", gguf_weights="quantized")
    assert runner.weights_format == "quantized" and runner.dtype == torch.bfloat16
    layer = runner.model.model.layers[0]
    assert layer.mlp.gate_up_proj.int4 is not None and layer.mlp.gate_up_proj.weight is None
    for dense in (layer.self_attn.qkv_proj, layer.self_attn.o_proj, layer.mlp.down_proj):
        assert dense.int4 is None and dense.weight is not None
    names = {name for name, _ in runner.model.named_parameters()}
    assert "model.layers.0.mlp.gate_up_proj.weight" not in names


def _first_logits_and_tokens(runner: ModelRunner, prompts: list[list[int]], num_tokens: int):
    from sglr.engine.offline import generate_token_ids

    logits = []
    for prompt in prompts:
        slots = np.arange(1, len(prompt) + 1)
        request = ExtendRequest(1, np.array(prompt), np.zeros(0, dtype=np.int64), slots)
        logits.append(runner.forward_extend([request]).next_token_logits[0].clone())
    return torch.stack(logits), generate_token_ids(runner, prompts, num_tokens)


@pytest.mark.parametrize("architecture", ["llama", "qwen2"])
def test_tiny_gguf_quantized_matches_dequantized(gguf_cache, architecture):
    """Against the exact (fp32) dequantized path, the int4 path's logits stay within a few times
    the dequantized bf16 path's error (both round to bf16: the activations, and the int4 scales
    and zeros, a systematic error per group of 32, or each bf16 weight). A random tiny model
    amplifies that to ~0.2-1.2 logits (a bug such as a wrong row order: ~15), which is why greedy
    tokens are compared on SmolLM2 below, not here."""
    spec = TinySpec(architecture=architecture, tensor_types=ALL_INT4, intermediate_size=128)
    write_tiny_gguf(gguf_cache / "t.gguf", spec, seed=3)
    quantized = _runner(gguf_cache / "t.gguf", gguf_weights="quantized")
    assert all(m.int4 is not None for m in _linears(quantized))
    assert quantized.model.model.embed_tokens.q8 is not None  # tied Q8_0 rows: the 8-bit head
    dequantized = {dtype: _runner(gguf_cache / "t.gguf", dtype=dtype) for dtype in ("float32", "bfloat16")}
    rng = np.random.default_rng(0)
    prompts = [rng.integers(3, quantized.vocab_size, size=n).tolist() for n in (5, 17, 40)]
    q_logits, _ = _first_logits_and_tokens(quantized, prompts, 1)
    e_logits, _ = _first_logits_and_tokens(dequantized["float32"], prompts, 1)
    b_logits, _ = _first_logits_and_tokens(dequantized["bfloat16"], prompts, 1)
    q_error = (q_logits - e_logits).abs().amax(-1)
    b_error = (b_logits - e_logits).abs().amax(-1)
    assert (q_error <= 4 * b_error + 0.3).all(), (q_error, b_error)
    # A wrong row order, scale or zero would be off by the logits' own size.
    assert q_error.max() < 0.15 * e_logits.abs().max()


def _param_bytes(runner: ModelRunner) -> int:
    return sum(p.numel() * p.element_size() for p in runner.model.parameters())


def _linears(runner: ModelRunner) -> list[Linear]:
    return [m for m in runner.model.modules() if isinstance(m, Linear)]


def test_smollm2_quantized_tokens_and_logits():
    """The embedded model (Q4_1 layers, Q8_0 embeddings): its first 12 greedy tokens on chat
    prompts equal the dequantized bf16 path's, and the first logits are within 1.0 of the exact
    fp32 path's (a logit range of ~32; the dequantized bf16 path measures 0.71, int4 0.67)."""
    from transformers import AutoTokenizer

    quantized = _runner(None, gguf_weights="quantized")
    assert sum(m.int4 is not None for m in _linears(quantized)) == 4 * 30
    bf16 = _runner(None, dtype="bfloat16", gguf_weights="dequantized")
    # No second copy: the int4 layers hold no dense weight (about 2.2x fewer weight bytes).
    quantized_bytes = _param_bytes(quantized) + sum(m.int4.num_bytes for m in _linears(quantized) if m.int4)
    assert quantized_bytes < 0.5 * _param_bytes(bf16)
    exact = _runner(None, dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(exact.model_dir)
    questions = ["What is the capital of France?", "What is 3 + 4?", "Name three colors."]
    prompts = [
        tokenizer.encode(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False
            )
        )
        for q in questions
    ]
    q_logits, q_tokens = _first_logits_and_tokens(quantized, prompts, 12)
    b_logits, b_tokens = _first_logits_and_tokens(bf16, prompts, 12)
    e_logits, _ = _first_logits_and_tokens(exact, prompts, 1)
    assert q_tokens == b_tokens
    assert (q_logits - e_logits).abs().max().item() < 1.0
    assert (b_logits - e_logits).abs().max().item() < 1.0


def test_quantized_is_refused_where_it_cannot_apply(gguf_cache, tiny_path):
    write_tiny_gguf(gguf_cache / "t.gguf", TinySpec(tensor_types=ALL_INT4))
    with pytest.raises(ModelConfigError, match="bfloat16"):
        _runner(gguf_cache / "t.gguf", gguf_weights="quantized", dtype="float32")
    with pytest.raises(ModelConfigError, match="not a GGUF"):
        _runner(tiny_path, gguf_weights="quantized")
    with pytest.raises(ModelConfigError, match="gguf_weights"):
        RunnerConfig(None, gguf_weights="int3")
    # The default: quantized where it applies; the file's precision where it does not.
    assert _runner(gguf_cache / "t.gguf").weights_format == "quantized"
    assert _runner(gguf_cache / "t.gguf", dtype="float32").weights_format == "dequantized"
    write_tiny_gguf(gguf_cache / "q8.gguf", TinySpec(tensor_types={"ffn_up.weight": T.Q8_0}))
    no_int4 = _runner(gguf_cache / "q8.gguf")
    assert no_int4.weights_format == "dequantized" and no_int4.dtype == torch.float32


def test_worker_engine_runs_a_quantized_gguf_like_the_in_process_one(gguf_cache):
    """The worker layout (the server's default) keeps the GGUF file for its 4-bit blocks."""
    from sglr.engine.engine import Engine

    write_tiny_gguf(gguf_cache / "t.gguf", TinySpec(tensor_types=ALL_INT4, intermediate_size=128), seed=5)
    params = {"max_new_tokens": 6, "temperature": 0.0, "ignore_eos": True}
    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    outputs = {}
    for multiprocess in (False, True):
        engine = Engine(
            model_path=str(gguf_cache / "t.gguf"), device="cpu", gguf_weights="quantized",
            multiprocess=multiprocess, max_total_tokens=512,
        )  # fmt: skip
        try:
            assert engine.runner.weights_format == "quantized"
            results = engine.generate(input_ids=prompts, sampling_params=params)
            outputs[multiprocess] = [r["output_ids"] for r in results]
        finally:
            engine.shutdown()
    assert outputs[True] == outputs[False]


def test_auto_converts_to_the_dtype_each_layout_computes_in(gguf_cache):
    """One rank keeps the 4-bit blocks and loads a bf16 conversion; tensor-parallel ranks run
    dequantized, in float32 on the CPU, and must load a float32 conversion."""
    from sglr.model.runner import resolve_model_dir

    write_tiny_gguf(gguf_cache / "t.gguf", TinySpec(tensor_types=ALL_INT4))
    config = RunnerConfig(gguf_cache / "t.gguf", device="cpu")
    assert "bfloat16" in resolve_model_dir(config).name
    assert "float32" in resolve_model_dir(config, tensor_parallel=True).name
