"""`RunnerConfig`: how a `ModelRunner` loads and runs a model (validated when built)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sglr.errors import ModelConfigError
from sglr.kernels.attention import ATTENTION_BACKENDS
from sglr.model.lora.adapter import LORA_PROJECTIONS

RUN_DTYPES = ("float32", "bfloat16", "float16")
GGUF_WEIGHTS = ("auto", "quantized", "dequantized")
QUANTIZATIONS = ("fp8",)
KV_CACHE_DTYPES = ("auto", "fp8_e4m3")


@dataclass(frozen=True)
class RunnerConfig:
    """How to load and run a model.

    model_path: a Hugging Face-format directory, a `.gguf` file (converted once, cached), None for
        the embedded default model, or a Hub id when a network is there.
    dtype: "auto" = the checkpoint's dtype on CUDA, float32 on CPU.
    device: "auto" = "cuda" when available, else "cpu".
    kv_num_tokens / mem_fraction: KV cache size as a token count, or as the fraction of device
        memory the process may use in total (weights included). Default: 0.85 on CUDA,
        65536 tokens on CPU. Give at most one.
    max_num_reqs: rows of the request table (requests in flight at once).
    max_context_len: longest sequence; default the model's `max_position_embeddings`.
    attention_backend: "auto" | "torch" | "triton" | "flashinfer".
    load_format: "auto" (safetensors, or .bin) | "dummy" (seeded random weights; needs only
        config.json).
    cuda_graph_max_bs: capture decode CUDA graphs up to this batch size (0 disables them).
    cuda_graph_extend_max_tokens: capture extend CUDA graphs for batches of up to this many new
        tokens (buckets 16, 32, 64, ...; 0, the default, disables them) and up to
        `cuda_graph_extend_max_reqs` requests: jump-forward runs, chunk tails and short prompts
        replay a padded graph instead of launching every kernel (`model/cuda_graph_extend.py`;
        the Triton attention backend only).
    num_draft_rows: extra request-table rows for speculative verification (rows
        `max_num_reqs + 1 ..`): each draft token of a verify pass attends through a row of its
        own holding its request's prefix and its tree path (0 without speculation).
    gguf_weights: for a GGUF checkpoint on the CPU, "quantized" keeps its Q4_0 / Q4_1 / Q8_0 /
        Q4_K / Q5_K / Q6_K matrices as stored in memory and multiplies them as such
        (`sglr.kernels.cpu_quantized`, and decode steps in one Rust call,
        `sglr.model.cpu_fused_decode`; the run dtype is bfloat16); "dequantized" converts every
        weight to the run dtype; "auto" is quantized where it applies (a GGUF file with 4- to
        6-bit matrices, or with only quantized layer matrices, on the CPU, one rank, dtype auto or
        bfloat16; `runs_quantized_by_default`), dequantized otherwise: on SmolLM2 (Q4_1)
        quantized decodes ~3x faster than bf16 at ~0.95x its prefill speed, and a Q8_0 file
        decodes ~4x and prefills ~1.5x faster than its float32 conversion
        (benches/results/smollm2_cpu_gguf.md).
    enable_lora: serve LoRA adapters (`load_lora`); max_lora_rank: the largest rank one may have
        (None: any); lora_target_modules: the projections they may adapt (None: any of
        q/k/v/o/gate/up/down); lora_adapters: (id, name, PEFT directory) of the adapters every
        rank loads at start; lora_backend: "torch" (grouped matmuls per adapter), "triton" (one
        segmented kernel per linear), "auto" (triton on CUDA, torch on the CPU).
    quantization: None, or "fp8": the decoder layers' linear weights quantized at load to e4m3
        with per-channel scales (`sglr.model.fp8_weights`); an FP8 checkpoint loads as stored
        whatever this says (`sglr.model.fp8_checkpoint`). docs/quantization.md.
    kv_cache_dtype: "auto" (the run dtype) or "fp8_e4m3": K/V stored as e4m3 with per-layer
        scales (the checkpoint's k_scale / v_scale, else 1.0); torch attention backend only.
    """

    model_path: str | Path | None
    dtype: str = "auto"
    device: str = "auto"
    kv_num_tokens: int | None = None
    mem_fraction: float | None = None
    max_num_reqs: int = 256
    max_context_len: int | None = None
    attention_backend: str = "auto"
    load_format: str = "auto"
    seed: int = 0
    cuda_graph_max_bs: int = 256
    cuda_graph_batch_sizes: tuple[int, ...] = field(default=())
    cuda_graph_extend_max_tokens: int = 0
    cuda_graph_extend_max_reqs: int = 4
    gguf_weights: str = "auto"
    num_draft_rows: int = 0
    enable_lora: bool = False
    max_lora_rank: int | None = None
    lora_target_modules: tuple[str, ...] | None = None
    lora_adapters: tuple[tuple[int, str, str], ...] = ()
    lora_backend: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"

    def __post_init__(self) -> None:
        if self.dtype != "auto" and self.dtype not in RUN_DTYPES:
            raise ModelConfigError(f"dtype must be 'auto' or one of {sorted(RUN_DTYPES)}, got {self.dtype!r}")
        if self.kv_num_tokens is not None and self.mem_fraction is not None:
            raise ModelConfigError("give kv_num_tokens or mem_fraction, not both")
        if self.kv_num_tokens is not None and self.kv_num_tokens < 1:
            raise ModelConfigError(f"kv_num_tokens must be >= 1, got {self.kv_num_tokens}")
        if self.mem_fraction is not None and not 0.0 < self.mem_fraction <= 1.0:
            raise ModelConfigError(f"mem_fraction must be in (0, 1], got {self.mem_fraction}")
        if self.max_num_reqs < 1 or (self.max_context_len is not None and self.max_context_len < 1):
            raise ModelConfigError("max_num_reqs and max_context_len must be >= 1")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ModelConfigError(f"attention_backend must be one of {ATTENTION_BACKENDS}")
        if self.load_format not in ("auto", "dummy"):
            raise ModelConfigError(f"load_format must be 'auto' or 'dummy', got {self.load_format!r}")
        if self.lora_backend not in ("auto", "torch", "triton"):
            raise ModelConfigError(f"lora_backend must be auto, torch or triton, got {self.lora_backend!r}")
        if self.lora_adapters and not self.enable_lora:
            raise ModelConfigError("lora_adapters need enable_lora")
        if self.max_lora_rank is not None and self.max_lora_rank < 1:
            raise ModelConfigError("max_lora_rank must be >= 1")
        if self.lora_target_modules is not None:
            unknown = sorted(set(self.lora_target_modules) - set(LORA_PROJECTIONS))
            if unknown:
                raise ModelConfigError(
                    f"lora_target_modules {unknown} are not adaptable (only {', '.join(LORA_PROJECTIONS)})"
                )
        if self.num_draft_rows < 0:
            raise ModelConfigError("num_draft_rows must be >= 0")
        if self.cuda_graph_max_bs < 0:
            raise ModelConfigError("cuda_graph_max_bs must be >= 0")
        if self.cuda_graph_extend_max_tokens < 0 or self.cuda_graph_extend_max_reqs < 1:
            raise ModelConfigError(
                "cuda_graph_extend_max_tokens must be >= 0 and cuda_graph_extend_max_reqs >= 1"
            )
        if self.quantization is not None and self.quantization not in QUANTIZATIONS:
            raise ModelConfigError(
                f"quantization must be None or one of {QUANTIZATIONS}, got {self.quantization!r}"
            )
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ModelConfigError(
                f"kv_cache_dtype must be one of {KV_CACHE_DTYPES}, got {self.kv_cache_dtype!r}"
            )
        if self.gguf_weights not in GGUF_WEIGHTS:
            raise ModelConfigError(f"gguf_weights must be one of {GGUF_WEIGHTS}, got {self.gguf_weights!r}")
