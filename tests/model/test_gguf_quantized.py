"""GGUF matrices kept quantized (`RunnerConfig(gguf_weights="quantized")`): Q4_0/Q4_1/Q8_0 blocks
are read exactly, the integer kernel and its bf16 fallback compute the same product, and the model
gives the greedy tokens of the dequantized bf16 path with logits as close to the exact (fp32) ones
as that path's. K-quants and 5-bit blocks in a model: tests/model/test_gguf_kquants.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gguf import quants
from gguf_testing import ALL_4BIT, T, TinySpec, write_tiny_gguf

from sglr.errors import ModelConfigError
from sglr.kernels.cpu_quantized import (
    MAX_KERNEL_ROWS,
    dequantize_matrix,
    gguf_matrix,
    q4_matrix,
    quantized_linear,
)
from sglr.model.forward_batch import ExtendRequest
from sglr.model.gguf.reader import read_gguf
from sglr.model.layers import Linear
from sglr.model.runner import ModelRunner, RunnerConfig

ALL_INT4 = ALL_4BIT


def _runner(path, **kwargs) -> ModelRunner:
    return ModelRunner(RunnerConfig(path, device="cpu", kv_num_tokens=512, max_num_reqs=4, **kwargs))


def test_blocks_are_read_as_the_gguf_package_reads_them(tmp_path):
    """Every quantized matrix of the file, kept as stored and dequantized in Rust, equals the
    `gguf` package's own dequantization (an independent reader of the same bytes)."""
    five_bit = {"attn_q.weight": T.Q5_0, "attn_k.weight": T.Q5_1, "ffn_down.weight": T.Q5_0}
    write_tiny_gguf(tmp_path / "t.gguf", TinySpec(tensor_types={**ALL_INT4, **five_bit}))
    checkpoint = read_gguf(tmp_path / "t.gguf")
    seen = set()
    for tensor in checkpoint.tensors:
        if tensor.type_name not in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0") or len(tensor.shape) != 2:
            continue
        seen.add(tensor.type_name)
        rows, cols = tensor.shape
        matrix = gguf_matrix([(tensor.type_name, np.asarray(tensor.data).reshape(rows, -1))], cols)
        expected = quants.dequantize(tensor.data, tensor.ggml_type).reshape(tensor.shape)
        np.testing.assert_array_equal(dequantize_matrix(matrix).numpy(), expected)
    assert seen == {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"}


@pytest.mark.parametrize("rows", [1, 5, MAX_KERNEL_ROWS + 3])
def test_q4_linear_matches_its_formula(rows):
    """The integer kernel (few rows: int8 activations) and the dequantize-then-GEMM path (many
    rows) against float64 math on the exact levels, scales and zeros; `dequantize_matrix` is exact
    in float32. Scales and minimums are fp16 values, as in GGUF's blocks (the matrix stores
    them as fp16)."""
    rng = np.random.default_rng(rows)
    n, k = 192, 96
    levels = rng.integers(0, 16, size=(n, k)).astype(np.uint8)
    scales = (rng.random((n, k // 32)) * 0.02).astype(np.float16).astype(np.float32)
    mins = (rng.standard_normal((n, k // 32)) * 0.02).astype(np.float16).astype(np.float32)
    zeros = mins + 8 * scales
    matrix = q4_matrix(levels, scales, zeros)
    dense = (levels.astype(np.float64) - 8) * np.repeat(scales, 32, axis=1) + np.repeat(zeros, 32, axis=1)
    np.testing.assert_allclose(dequantize_matrix(matrix).numpy(), dense, rtol=1e-6, atol=1e-7)
    x = torch.from_numpy(rng.standard_normal((rows, k)).astype(np.float32)).to(torch.bfloat16)
    y = quantized_linear(x, matrix)
    assert y.shape == (rows, n) and y.dtype == torch.bfloat16
    expected = x.double().numpy() @ dense.T
    # int8 activations (few rows) or bf16 weights (many): ~1% of the output's scale.
    np.testing.assert_allclose(y.double().numpy(), expected, atol=0.015 * np.abs(expected).max())


def test_only_linears_stored_in_kernel_formats_stay_quantized(gguf_cache):
    """The default tiny spec mixes formats: q/k/v (an F32 q) and o (F16) stay dense; gate/up
    (Q4_0 + Q4_1) and down (Q8_0) stay quantized and hold no dense weight."""
    write_tiny_gguf(gguf_cache / "t.gguf", TinySpec(intermediate_size=128))
    runner = _runner(gguf_cache / "t.gguf", gguf_weights="quantized")
    assert runner.weights_format == "quantized" and runner.dtype == torch.bfloat16
    layer = runner.model.model.layers[0]
    for kept in (layer.mlp.gate_up_proj, layer.mlp.down_proj):
        assert kept.quantized is not None and kept.weight is None
    assert layer.mlp.gate_up_proj.quantized.type_names == ["Q4_0", "Q4_1"]
    for dense in (layer.self_attn.qkv_proj, layer.self_attn.o_proj):
        assert dense.quantized is None and dense.weight is not None
    assert runner.fused_decode is None  # not every matrix is quantized: the layered path decodes
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
    assert all(m.quantized is not None for m in _linears(quantized))
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


def _teacher_forced(runner: ModelRunner, sequence: list[int], prompt_len: int) -> torch.Tensor:
    """Logits after the prompt (a prefill) and after each later token of `sequence` (decode
    steps: the fused step where the runner has one)."""
    empty = np.zeros(0, dtype=np.int64)
    prompt = np.array(sequence[:prompt_len])
    logits = [runner.forward_extend([ExtendRequest(1, prompt, empty, np.arange(1, prompt_len + 1))])]
    for n in range(prompt_len, len(sequence) - 1):
        logits.append(runner.forward_decode([1], [sequence[n]], [n + 1], [n + 1]))
    return torch.stack([out.next_token_logits[0].clone() for out in logits])


def _rms(errors: list[torch.Tensor]) -> float:
    return torch.cat([e.flatten() for e in errors]).pow(2).mean().sqrt().item()


def _with_int8_inputs(model: torch.nn.Module, decode_from: list[int]) -> torch.nn.Module:
    """`model` with every Linear's input at the positions from `decode_from[0]` on (those the
    fused decode steps compute; the prompt's stay as they are) rounded as those steps round
    activations: int8 levels per block of 32, step = max |x| / 127, ties to even."""

    def round_input(_module, args):
        (x,) = args
        decoded = x[:, decode_from[0] :]
        blocks = decoded.reshape(*decoded.shape[:-1], -1, 32)
        step = blocks.abs().amax(-1, keepdim=True) / 127
        levels = torch.where(step > 0, blocks / step, torch.zeros_like(blocks)).round().clamp(-127, 127)
        return (torch.cat([x[:, : decode_from[0]], (levels * step).reshape(decoded.shape)], dim=1),)

    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_pre_hook(round_input)
    return model


def test_smollm2_quantized_tokens_and_logits():
    """The embedded model (Q4_1 layers, Q8_0 embeddings), teacher-forced along the exact fp32
    path's 12 greedy tokens on three chat prompts (prefill, then fused decode steps), against the
    exact path: the same next token wherever the exact path's top two logits are at least 0.5
    apart (closer calls are coin tosses for any lower-precision path: this prompt set has seven,
    two of them 0.02 and 0.08 apart, where bf16 and 4-bit greedy runs part), and logits as close
    as a reference measured on this machine allows.

    The reference is torch's own bf16 (`transformers` on the same weights, same positions): its
    error moves with the CPU's bf16 kernels (native bf16 instructions, AMX, or emulation), and
    sglr's bf16 path multiplies with those same kernels on the same bf16 weights, rounding at
    the same points up to fusion (fused q/k/v and gate/up round each output once, as separate
    matmuls do; its decode attention reads the bf16 cache in float32). Independent rounding errors add in variance, so even twice as many rounding points
    would give sqrt(2) times the reference's RMS error: that bounds the RMS (a stable statistic:
    ~1.8M logits). The largest error is one sample of a heavy-tailed distribution (~1.1 on a
    logit range of ~32): half as much again as the reference's largest allows for that.

    The 4-bit path keeps the bf16 reference's kinds of error (prefill, bf16 activations and
    KV cache) and adds the int8 activations of the fused decode steps (an integer kernel on
    every CPU: no CPU-specific error) in place of the bf16 rounding of the weights (the 4-bit
    values are exact). That second kind has its own reference, measured here too and the same
    on every CPU: `transformers` in float32 with every Linear's input at the decoded positions rounded
    to int8 per block of 32 as the fused step rounds it. The 4-bit path's errors add in variance to both references'
    (`sqrt(ref_bf16^2 + ref_int8^2)`), held to the same two bounds: on a CPU whose native bf16
    products make torch's bf16 reference small, the int8 part's error is still allowed for."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sglr.engine.offline import generate_token_ids

    quantized = _runner(None, gguf_weights="quantized")
    assert sum(m.quantized is not None for m in _linears(quantized)) == 4 * 30
    assert quantized.fused_decode is not None  # the decode steps below run in one Rust call
    bf16 = _runner(None, dtype="bfloat16", gguf_weights="dequantized")
    # No second copy: the 4-bit layers hold no dense weight (about 2x fewer weight bytes).
    quantized_bytes = _param_bytes(quantized) + sum(
        m.quantized.num_bytes for m in _linears(quantized) if m.quantized
    )
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
    continuations = generate_token_ids(exact, prompts, 12)
    torch_bf16 = AutoModelForCausalLM.from_pretrained(exact.model_dir, torch_dtype=torch.bfloat16)
    decode_from = [0]
    torch_int8 = _with_int8_inputs(
        AutoModelForCausalLM.from_pretrained(exact.model_dir, torch_dtype=torch.float32), decode_from
    )
    num_decided = 0
    errors: dict[str, list[torch.Tensor]] = {"reference": [], "int8": [], "bf16": [], "quantized": []}
    for prompt, continuation in zip(prompts, continuations, strict=True):
        sequence = prompt + continuation
        e = _teacher_forced(exact, sequence, len(prompt))
        top2 = e.topk(2).values
        decided = top2[:, 0] - top2[:, 1] >= 0.5
        num_decided += int(decided.sum())
        with torch.no_grad():
            reference = torch_bf16(torch.tensor([sequence])).logits[0, len(prompt) - 1 : -1].float()
            decode_from[0] = len(prompt)
            int8 = torch_int8(torch.tensor([sequence])).logits[0, len(prompt) - 1 : -1].float()
        errors["reference"].append(reference - e)
        errors["int8"].append(int8 - e)
        for name, runner in (("quantized", quantized), ("bf16", bf16)):
            logits = _teacher_forced(runner, sequence, len(prompt))
            errors[name].append(logits - e)
            assert torch.equal(logits.argmax(-1)[decided], e.argmax(-1)[decided]), name
    largest = {name: max(e.abs().max().item() for e in errs) for name, errs in errors.items()}
    rms = {name: _rms(errs) for name, errs in errors.items()}
    print(f"logit errors vs the exact path: RMS {rms}, largest {largest}")
    bound_rms = {"bf16": rms["reference"], "quantized": math.hypot(rms["reference"], rms["int8"])}
    bound_largest = {
        "bf16": largest["reference"],
        "quantized": math.hypot(largest["reference"], largest["int8"]),
    }
    for name in ("bf16", "quantized"):
        assert rms[name] <= 2**0.5 * bound_rms[name], (name, rms)
        assert largest[name] < 1.5 * bound_largest[name], (name, largest)
    assert num_decided >= 24  # of 36 positions (29 measured): the check is not vacuous


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
    no_low_bit = _runner(gguf_cache / "q8.gguf")
    assert no_low_bit.weights_format == "dequantized" and no_low_bit.dtype == torch.float32
    # A file whose layer matrices are all Q8_0 runs quantized by default; asked for, a file's
    # Q8_0 matrices stay 8-bit wherever they are.
    all_q8 = {
        s: T.Q8_0 for s in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
    }
    write_tiny_gguf(
        gguf_cache / "all_q8.gguf", TinySpec(tensor_types={f"{s}.weight": t for s, t in all_q8.items()})
    )
    assert _runner(gguf_cache / "all_q8.gguf").weights_format == "quantized"
    q8 = _runner(gguf_cache / "q8.gguf", gguf_weights="quantized")
    assert q8.model.model.layers[0].mlp.gate_up_proj.quantized is None  # an F32 gate beside it
    write_tiny_gguf(
        gguf_cache / "q8_mlp.gguf",
        TinySpec(tensor_types={s: T.Q8_0 for s in ("ffn_gate.weight", "ffn_up.weight")}),
    )
    q8 = _runner(gguf_cache / "q8_mlp.gguf", gguf_weights="quantized")
    assert q8.model.model.layers[0].mlp.gate_up_proj.quantized.type_names == ["Q8_0", "Q8_0"]


def test_worker_engine_runs_a_quantized_gguf_like_the_in_process_one(gguf_cache):
    """The worker layout (the server's default) keeps the GGUF file for its quantized blocks."""
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
    from sglr.model.weights_policy import resolve_model_dir

    write_tiny_gguf(gguf_cache / "t.gguf", TinySpec(tensor_types=ALL_INT4))
    config = RunnerConfig(gguf_cache / "t.gguf", device="cpu")
    assert "bfloat16" in resolve_model_dir(config).name
    assert "float32" in resolve_model_dir(config, tensor_parallel=True).name
