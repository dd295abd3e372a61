"""Which weights a runner loads, from where and in which dtype: a checkpoint directory as is, a
GGUF file converted to the run dtype, or a GGUF file whose quantized matrices stay quantized
(`RunnerConfig.gguf_weights`); and loading them into a built model.

A quantized run keeps the file's Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / K-quant matrices as stored
(`sglr.model.gguf_quantized`) and computes in bfloat16; the converted directory then supplies
only what is not quantized (norms, biases, float matrices), read lazily so its dense copies of
the quantized matrices are never read.

FP8: a checkpoint whose `config.json` declares an FP8 `quantization_config` loads its fp8 linears
as stored (`sglr.model.fp8_checkpoint`); `RunnerConfig.quantization="fp8"` quantizes a float
checkpoint's linears after loading (`sglr.model.fp8_weights`). Neither applies to GGUF weights
kept quantized.
"""

from __future__ import annotations

from pathlib import Path

import torch

from sglr.errors import ModelConfigError
from sglr.model.config import ModelConfig
from sglr.model.fp8_checkpoint import fp8_checkpoint_layout, load_fp8_checkpoint
from sglr.model.fp8_weights import quantize_linears
from sglr.model.gguf_quantized import load_quantized_linears, without_names
from sglr.model.loader import fill_dummy_weights, iter_checkpoint_tensors, resolve_checkpoint_dir
from sglr.model.parallel import TensorParallel
from sglr.model.runner_config import RunnerConfig

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelConfigError("device 'cuda' requested but CUDA is not available")
    return device


def run_dtype(
    name: str, config: ModelConfig, device: torch.device, quantized_source: Path | None
) -> torch.dtype:
    """The dtype the model computes in: bfloat16 for quantized GGUF weights, else `name`
    ("auto": the checkpoint's dtype on CUDA, float32 on the CPU)."""
    if quantized_source is not None:
        return torch.bfloat16
    if name != "auto":
        return _DTYPES[name]
    if device.type != "cuda":
        return torch.float32
    return _DTYPES.get(config.torch_dtype, torch.bfloat16)


def load_weights(
    model: torch.nn.Module,
    config: RunnerConfig,
    model_dir: Path,
    quantized_source: Path | None,
    tp: TensorParallel | None,
) -> None:
    """Fills `model`: seeded dummy weights, or the quantized matrices of `quantized_source`
    plus the rest of `model_dir`, or all of `model_dir` (read lazily under tensor parallelism,
    each rank taking its slices); an FP8 checkpoint's linears as stored, or (quantization
    "fp8") the loaded linears quantized."""
    fp8_layout = None if config.load_format == "dummy" else fp8_checkpoint_layout(model_dir)
    if quantized_source is not None and config.quantization is not None:
        raise ModelConfigError("quantization='fp8' does not combine with GGUF weights kept quantized")
    if config.load_format == "dummy":
        fill_dummy_weights(model, seed=config.seed + (tp.rank if tp else 0))
    elif quantized_source is not None:
        consumed = load_quantized_linears(model, quantized_source)
        # Lazy: the dense copies of the quantized matrices in the converted directory are never read.
        model.load_weights(without_names(iter_checkpoint_tensors(model_dir, lazy=True), consumed))
    elif fp8_layout is not None:
        consumed = load_fp8_checkpoint(model, model_dir, fp8_layout)
        model.load_weights(without_names(iter_checkpoint_tensors(model_dir, lazy=True), consumed))
    else:
        model.load_weights(iter_checkpoint_tensors(model_dir, lazy=tp is not None))
    if config.quantization == "fp8" and fp8_layout is None:
        quantize_linears(model)


def resolve_model_dir(config: RunnerConfig, tensor_parallel: bool = False) -> Path:
    """The Hugging Face-format directory the runner loads (a GGUF file is converted once, to
    the dtype the device computes in: bf16 when its quantized matrices stay so, which never
    happens under tensor parallelism)."""
    device = resolve_device(config.device)
    gguf_dtype = (
        config.dtype if config.dtype != "auto" else ("bfloat16" if device.type == "cuda" else "float32")
    )
    if quantized_gguf_source(config, tensor_parallel) is not None:
        gguf_dtype = "bfloat16"
    return resolve_checkpoint_dir(config.model_path, gguf_dtype)


def quantized_gguf_source(config: RunnerConfig, tensor_parallel: bool) -> Path | None:
    """The GGUF file to load quantized matrices from when `config` runs quantized, else None. Raises
    `ModelConfigError` when "quantized" is asked for where it cannot apply."""
    if config.gguf_weights == "dequantized" or config.load_format == "dummy":
        return None
    from sglr.model.default_model import gguf_source_path

    path = config.model_path
    source = None if path is not None and not Path(path).expanduser().exists() else gguf_source_path(path)
    problem = None
    if source is None:
        problem = "the model is not a GGUF file"
    elif resolve_device(config.device).type != "cpu":
        problem = "quantized GGUF weights run on the CPU only"
    elif tensor_parallel:
        problem = "quantized GGUF weights do not support tensor parallelism"
    elif config.dtype not in ("auto", "bfloat16"):
        problem = f"quantized GGUF weights compute in bfloat16, not {config.dtype}"
    elif config.gguf_weights == "auto" and not runs_quantized_by_default(source):
        problem = "float matrices"  # "auto" keeps the file's precision
    if problem is None:
        return source
    if config.gguf_weights == "quantized":
        raise ModelConfigError(f"gguf_weights='quantized': {problem}")
    return None


def runs_quantized_by_default(gguf_path: Path) -> bool:
    """Whether `gguf_weights="auto"` keeps the file's matrices quantized (reads the header only):
    when any matrix is 4- to 6-bit (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), or when every layer
    matrix is in a kernel format (a Q8_0 file: then nothing finer than 8 bits is lost, and the
    8-bit kernels beat the float32 conversion at prefill, decode and memory; a file with float
    matrices keeps its precision)."""
    from gguf import GGMLQuantizationType

    from sglr.model.gguf.tensor_types import gguf_tensor_types
    from sglr.model.gguf_quantized import LOW_BIT_TYPE_NAMES, QUANTIZED_TYPE_NAMES

    types = {name: GGMLQuantizationType(code).name for name, code in gguf_tensor_types(gguf_path).items()}
    if any(kind in LOW_BIT_TYPE_NAMES for kind in types.values()):
        return True
    # Layer matrices: not norms, not MoE routers (kept in float by llama.cpp).
    matrices = [
        kind
        for name, kind in types.items()
        if name.startswith("blk.")
        and name.endswith(".weight")
        and "norm" not in name
        and "gate_inp" not in name
    ]
    return bool(matrices) and all(kind in QUANTIZED_TYPE_NAMES for kind in matrices)
