"""GGUF K-quant matrices (Q4_K, Q5_K, Q6_K) kept as stored (`sglr._core.GgufMatrix`, rust/kernels):
their bytes read as the `gguf` package reads them, the integer kernels against the dequantized
weights, fused matrices mixing formats, typed refusals, and tiny Q4_K_M-shaped models (Q4_K, Q5_K,
Q6_K layers, Q8_0 tied embeddings; or llama.cpp's Q5_0 / Q8_0 fallbacks with a Q6_K tied head)
whose fused and layered decode steps stay as close to the exact fp32 path as the 4-bit formats'
do."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import quants
from gguf_testing import T, TinySpec, write_tiny_gguf
from kquant_testing import K_TYPES, quantize_k

from sglr.kernels.cpu_quantized import MAX_KERNEL_ROWS, dequantize_matrix, gguf_matrix, quantized_linear
from sglr.model.forward_batch import ExtendRequest
from sglr.model.layers import Linear
from sglr.model.runner import ModelRunner, RunnerConfig
from sglr.model.weights_policy import runs_quantized_by_default

EMPTY = np.zeros(0, dtype=np.int64)
# The mix a Q4_K_M file uses: 4-bit most places, 6-bit values and down projections.
Q4_K_M = {
    "token_embd.weight": T.Q8_0,
    "attn_q.weight": T.Q4_K,
    "attn_k.weight": T.Q4_K,
    "attn_v.weight": T.Q6_K,
    "attn_output.weight": T.Q4_K,
    "ffn_gate.weight": T.Q4_K,
    "ffn_up.weight": T.Q5_K,
    "ffn_down.weight": T.Q6_K,
}


def _values(rows: int, cols: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Blocks of different magnitudes and offsets, as real weights have.
    return (
        rng.standard_normal((rows, cols)) * rng.uniform(0.05, 0.5, (rows, cols // 32)).repeat(32, 1)
    ).astype(np.float32)


@pytest.mark.parametrize("ggml_type", K_TYPES, ids=lambda t: t.name)
def test_blocks_are_read_as_the_gguf_package_reads_them(ggml_type):
    values = _values(6, 768, seed=ggml_type.value)
    blocks = quantize_k(values, ggml_type)
    expected = quants.dequantize(blocks, ggml_type)
    matrix = gguf_matrix([(ggml_type.name, blocks)], 768)
    assert (matrix.rows, matrix.cols, matrix.num_bytes) == (6, 768, blocks.size)  # as stored
    np.testing.assert_array_equal(dequantize_matrix(matrix).numpy(), expected)
    # The test quantizer itself is sound: within a fraction of each row's range.
    bound = {T.Q4_K: 0.1, T.Q5_K: 0.05, T.Q6_K: 0.03}[ggml_type]
    assert (np.abs(expected - values).max(1) <= bound * np.abs(values).max(1)).all()


@pytest.mark.parametrize("ggml_type", K_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows", [1, 3, 6, MAX_KERNEL_ROWS + 3])
def test_linear_matches_its_dequantized_weights(ggml_type, rows):
    """Integer kernels (up to MAX_KERNEL_ROWS rows, int8 activations, 1-4 rows per weight pass)
    and the dequantize-then-GEMM path (more rows) against float64 math on the stored weights."""
    blocks = quantize_k(_values(96, 512, seed=rows), ggml_type)
    dense = quants.dequantize(blocks, ggml_type).astype(np.float64)
    matrix = gguf_matrix([(ggml_type.name, blocks)], 512)
    x = torch.from_numpy(np.random.default_rng(rows).standard_normal((rows, 512)).astype(np.float32))
    y = quantized_linear(x.to(torch.bfloat16), matrix)
    assert y.shape == (rows, 96) and y.dtype == torch.bfloat16
    expected = x.double().numpy() @ dense.T
    np.testing.assert_allclose(y.double().numpy(), expected, atol=0.015 * np.abs(expected).max())


def test_mixed_formats_stack_in_row_order():
    """A fused q/k/v whose parts are Q4_K, Q6_K and Q8_0: each part's rows, values and products
    are its own."""
    parts_values = [_values(n, 256, seed=n) for n in (8, 4, 4)]
    parts = [
        ("Q4_K", quantize_k(parts_values[0], T.Q4_K)),
        ("Q6_K", quantize_k(parts_values[1], T.Q6_K)),
        ("Q8_0", quants.quantize(parts_values[2], T.Q8_0)),
    ]
    stacked = gguf_matrix(parts, 256)
    alone = [gguf_matrix([part], 256) for part in parts]
    assert stacked.rows == 16 and stacked.type_names == ["Q4_K", "Q6_K", "Q8_0"]
    assert stacked.num_bytes == sum(m.num_bytes for m in alone)
    np.testing.assert_array_equal(
        dequantize_matrix(stacked).numpy(), np.concatenate([dequantize_matrix(m).numpy() for m in alone])
    )
    x = torch.randn(3, 256)
    np.testing.assert_array_equal(
        quantized_linear(x, stacked).numpy(), torch.cat([quantized_linear(x, m) for m in alone], 1).numpy()
    )


def test_unsupported_and_malformed_blocks_are_refused():
    with pytest.raises(ValueError, match="IQ4_NL"):
        gguf_matrix([("IQ4_NL", np.zeros((1, 18), dtype=np.uint8))], 32)
    with pytest.raises(ValueError, match="multiple of 256"):
        gguf_matrix([("Q4_K", np.zeros((1, 144), dtype=np.uint8))], 128)
    with pytest.raises(ValueError, match="Q6_K bytes"):
        gguf_matrix([("Q6_K", np.zeros((1, 200), dtype=np.uint8))], 256)
    blocks = quantize_k(_values(2, 256, seed=0), T.Q4_K)
    matrix = gguf_matrix([("Q4_K", blocks)], 256)
    rows = np.empty((2, 256), dtype=np.float32)
    matrix.dequantize_rows(np.array([1, 0]), rows)
    np.testing.assert_array_equal(rows, dequantize_matrix(matrix).numpy()[[1, 0]])
    with pytest.raises(ValueError, match="outside"):
        matrix.dequantize_rows(np.array([2]), rows[:1])
    blocks[0, :2] = np.array([0x7E00], dtype="<u2").view(np.uint8)  # a NaN super-block scale
    with pytest.raises(ValueError, match="non-finite"):
        gguf_matrix([("Q4_K", blocks)], 256)


def _runner(path, **kwargs) -> ModelRunner:
    return ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=512, max_num_reqs=4, **kwargs))


# What llama.cpp writes for Q4_K_M when a row length is not a multiple of 256 (small models):
# Q5_0 for the 4-bit matrices and Q8_0 for the 6-bit ones; a K-quant head.
Q4_K_M_FALLBACKS = {
    "token_embd.weight": T.Q6_K,
    "attn_q.weight": T.Q5_0,
    "attn_k.weight": T.Q5_1,
    "attn_v.weight": T.Q8_0,
    "attn_output.weight": T.Q5_0,
    "ffn_gate.weight": T.Q5_0,
    "ffn_up.weight": T.Q5_0,
    "ffn_down.weight": T.Q4_K,
}
MIXES = {"k": Q4_K_M, "fallbacks": Q4_K_M_FALLBACKS}


def _tiny_k(gguf_cache, architecture: str, mix: str = "k"):
    # K-quants need rows of 256; a smaller weight scale keeps each layer's gain near 1 at that
    # width (at 0.3 the random model amplifies any rounding to several logits, bf16's included).
    spec = TinySpec(
        architecture=architecture, hidden_size=256, intermediate_size=256, tensor_types=MIXES[mix],
        weight_scale=0.06,
    )  # fmt: skip
    path = gguf_cache / f"{architecture}_{mix}.gguf"
    write_tiny_gguf(path, spec, seed=7)
    return path


def _teacher_forced_logits(runner: ModelRunner, prompt: list[int], forced: list[int]) -> torch.Tensor:
    n = len(prompt)
    logits = [runner.forward_extend([ExtendRequest(1, np.array(prompt), EMPTY, np.arange(1, n + 1))])]
    for i, token in enumerate(forced):
        seq_len = n + i + 1
        logits.append(runner.forward_decode([1], [token], [seq_len], [seq_len]))
    return torch.stack([out.next_token_logits[0].clone() for out in logits])


@pytest.mark.parametrize(("architecture", "mix"), [("llama", "k"), ("qwen2", "k"), ("llama", "fallbacks")])
def test_tiny_q4_k_m_model_matches_the_exact_path(gguf_cache, monkeypatch, architecture, mix):
    """Llama's q/k rows are permuted in the file (whole quantized rows move back); Qwen2 adds
    q/k/v biases; "fallbacks" has 5-bit layers and a Q6_K tied head / embedding. Teacher-forced prefill + decode logits of the fused step and of the layered path
    against fp32 dequantized weights: within a few times the bf16 dequantized path's error (the
    int8 or bf16 activations; measured 0.11-0.19 against bf16's 0.05-0.13 on a logit range of ~4);
    a wrong block order, scale or row would be off by the logits' own size."""
    path = _tiny_k(gguf_cache, architecture, mix)
    assert runs_quantized_by_default(path)
    fused_runner = _runner(path)  # "auto": quantized, as the file is 4- to 6-bit
    assert fused_runner.weights_format == "quantized" and fused_runner.fused_decode is not None
    assert fused_runner.fused_decode.has_head  # the tied head runs inside the fused step
    linears = [m for m in fused_runner.model.modules() if isinstance(m, Linear)]
    kept = {tuple(m.quantized.type_names) for m in linears if m.quantized is not None}
    assert len([m for m in linears if m.quantized is None]) == 0
    embeddings = fused_runner.model.model.embed_tokens
    if mix == "k":
        assert kept == {("Q4_K", "Q4_K", "Q6_K"), ("Q4_K",), ("Q4_K", "Q5_K"), ("Q6_K",)}
        assert embeddings.q8 is not None
    else:
        assert kept == {("Q5_0", "Q5_1", "Q8_0"), ("Q5_0",), ("Q5_0", "Q5_0"), ("Q4_K",)}
        assert embeddings.quantized.type_names == ["Q6_K"] and embeddings.weight is None
    rng = np.random.default_rng(1)
    prompt = rng.integers(3, 200, size=21).tolist()
    forced = rng.integers(3, 200, size=5).tolist()
    fused = _teacher_forced_logits(fused_runner, prompt, forced)
    exact = _teacher_forced_logits(_runner(path, dtype="float32"), prompt, forced)
    bf16 = _teacher_forced_logits(_runner(path, dtype="bfloat16", gguf_weights="dequantized"), prompt, forced)
    monkeypatch.setenv("SGLR_CPU_FUSED_DECODE", "0")
    layered = _teacher_forced_logits(_runner(path), prompt, forced)
    bf16_error = (bf16 - exact).abs().amax(-1)
    for logits in (fused, layered):
        error = (logits - exact).abs().amax(-1)
        assert (error <= 3 * bf16_error + 0.1).all(), (error, bf16_error)
        assert error.max() < 0.08 * exact.abs().max()


def test_batched_decode_steps_equal_unbatched_steps_exactly(gguf_cache):
    """Five requests at different lengths in one fused step (weight passes shared by groups of
    four and one): each one's logits and K/V bit for bit as alone."""
    config = RunnerConfig(_tiny_k(gguf_cache, "llama"), device="cpu", kv_num_tokens=512, max_num_reqs=5)
    runner = ModelRunner(config)
    assert runner.fused_decode is not None
    rng = np.random.default_rng(2)
    lengths, starts = [5, 19, 40, 7, 12], [1, 61, 121, 201, 261]
    rows = [1, 2, 3, 4, 5]
    for row, n, start in zip(rows, lengths, starts, strict=True):
        prompt = rng.integers(3, 200, size=n)
        runner.forward_extend([ExtendRequest(row, prompt, EMPTY, np.arange(start, start + n))])
    tokens = [7, 8, 9, 10, 11]
    seq_lens = [n + 1 for n in lengths]
    slots = [start + n for n, start in zip(lengths, starts, strict=True)]
    batched = runner.forward_decode(rows, tokens, seq_lens, slots).next_token_logits.clone()
    keys_batched = runner.kv_cache.k_buffer[:, slots].clone()
    for i in range(len(rows)):
        alone = runner.forward_decode([rows[i]], [tokens[i]], [seq_lens[i]], [slots[i]])
        torch.testing.assert_close(alone.next_token_logits[0], batched[i], rtol=0, atol=0)
    torch.testing.assert_close(runner.kv_cache.k_buffer[:, slots], keys_batched, rtol=0, atol=0)


def test_damaged_blocks_in_a_file_are_a_format_error_naming_the_tensor(gguf_cache):
    """A K-quant super-block whose fp16 scale is NaN: loading names the tensor, not a kernel."""
    import gguf

    from sglr.errors import GGUFFormatError
    from sglr.model.gguf.tensor_types import read_tensor_table

    path = _tiny_k(gguf_cache, "llama")
    table = read_tensor_table(path)
    entry = next(e for e in table.entries if e.name == "blk.1.ffn_down.weight")
    assert gguf.GGMLQuantizationType(entry.ggml_type).name == "Q6_K"
    raw = bytearray(path.read_bytes())
    at = table.data_start + entry.offset + 208  # the first super-block's d
    raw[at : at + 2] = np.array([0x7E00], dtype="<u2").tobytes()
    damaged = gguf_cache / "damaged.gguf"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(GGUFFormatError, match=r"mlp\.down_proj.*non-finite"):
        _runner(damaged, gguf_weights="quantized")
