"""Tiny random-weight checkpoints in Hugging Face format, built locally in about a second.

Tests, benchmarks and the offline demo need a real model directory without downloading one.
`write_tiny_model(path)` writes `config.json`, `model.safetensors` (seeded random weights),
`generation_config.json`, `tokenizer.json` and `tokenizer_config.json` (with a ChatML chat
template). Both `sglr` and `transformers` (`AutoModelForCausalLM`, `AutoTokenizer`) load it.
`tiny_model_path()` returns a cached copy under `sglr.envs.cache_dir()`, building it once.

The tokenizer is a byte-level BPE trained with `tokenizers` on the Python standard library's
own source text (every machine with Python has it), so any string round-trips. Output is
deterministic for a given Python installation and `tokenizers` version.

    from sglr.testing.tiny import tiny_model_path
    path = tiny_model_path("qwen2")            # cached, built on first use
    path = write_tiny_model(tmp_path, "llama", seed=1, num_layers=3, tie_word_embeddings=True)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from sglr.envs import cache_dir
from sglr.testing.tiny_tokenizer import SPECIAL_TOKENS, corpus_key, trained_tokenizer_json

# Bump when the files written change, so cached copies are rebuilt.
FACTORY_VERSION = 2
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
_ARCHS = {"llama": ("LlamaForCausalLM", "llama"), "qwen2": ("Qwen2ForCausalLM", "qwen2")}


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape and seed of a tiny model. Defaults give a ~0.6M-parameter model with GQA."""

    arch: str = "llama"
    seed: int = 0
    vocab_size: int = 4096
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    llama3_rope_scaling: bool = False
    num_shards: int = 1
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.arch not in _ARCHS:
            raise ValueError(f"arch must be one of {sorted(_ARCHS)}, got {self.arch!r}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError("hidden_size must divide by num_heads, and num_heads by num_kv_heads")
        if self.vocab_size < 512:
            raise ValueError("vocab_size must be >= 512 (256 byte tokens plus merges)")
        if self.num_shards < 1 or self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError("num_shards must be >= 1 and dtype one of float32/bfloat16/float16")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


def write_tiny_model(path: str | Path, arch: str = "llama", seed: int = 0, **overrides: Any) -> Path:
    """Writes a tiny model directory at `path` (created if missing) and returns it.

    `overrides` are `TinyModelSpec` fields (hidden_size, num_layers, tie_word_embeddings, ...).
    """
    spec = TinyModelSpec(arch=arch, seed=seed, **overrides)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer_json = trained_tokenizer_json(spec.vocab_size)
    (out / "tokenizer.json").write_text(tokenizer_json)
    vocab = json.loads(tokenizer_json)["model"]["vocab"]
    ids = {tok: vocab[tok] for tok in SPECIAL_TOKENS}
    config = _config_dict(spec, ids)
    _write_json(out / "config.json", config)
    _write_json(
        out / "generation_config.json",
        {
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
            "pad_token_id": ids["<|endoftext|>"],
        },
    )
    _write_json(out / "tokenizer_config.json", _tokenizer_config(spec))
    _write_weights(out, spec)
    return out


def tiny_model_path(arch: str = "llama", seed: int = 0, **overrides: Any) -> Path:
    """A cached tiny model directory (built on first call, reused by later calls and processes)."""
    spec = TinyModelSpec(arch=arch, seed=seed, **overrides)
    key = hashlib.sha256(json.dumps([FACTORY_VERSION, asdict(spec), corpus_key()]).encode()).hexdigest()[:16]
    target = cache_dir() / "tiny-models" / f"{arch}-{key}"
    if (target / "model.safetensors").is_file() or (target / "model.safetensors.index.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build aside and rename, so a concurrent process never sees a half-written directory.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write_tiny_model(staging, arch, seed, **overrides)
        # OSError: another process finished first; its copy is identical.
        with contextlib.suppress(OSError):
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _config_dict(spec: TinyModelSpec, ids: dict[str, int]) -> dict[str, Any]:
    architecture, model_type = _ARCHS[spec.arch]
    config: dict[str, Any] = {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": spec.max_position_embeddings,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "torch_dtype": spec.dtype,
        "initializer_range": 0.02,
        "use_cache": True,
    }
    if spec.llama3_rope_scaling:
        config["rope_scaling"] = {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            # Small, so that for tiny head dims some wavelengths are stretched and some blended.
            "original_max_position_embeddings": 1024,
        }
    if spec.arch == "llama":
        config.update(attention_bias=False, mlp_bias=False)
    else:
        config.update(use_sliding_window=False, sliding_window=None, max_window_layers=spec.num_layers)
    return config


def _tokenizer_config(spec: TinyModelSpec) -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": spec.max_position_embeddings,
        "chat_template": CHAT_TEMPLATE,
    }


def _weight_shapes(spec: TinyModelSpec) -> dict[str, tuple[int, ...]]:
    h, i, d = spec.hidden_size, spec.intermediate_size, spec.head_dim
    q, kv = spec.num_heads * d, spec.num_kv_heads * d
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (spec.vocab_size, h)}
    for n in range(spec.num_layers):
        p = f"model.layers.{n}."
        shapes.update(
            {
                p + "input_layernorm.weight": (h,),
                p + "self_attn.q_proj.weight": (q, h),
                p + "self_attn.k_proj.weight": (kv, h),
                p + "self_attn.v_proj.weight": (kv, h),
                p + "self_attn.o_proj.weight": (h, q),
                p + "post_attention_layernorm.weight": (h,),
                p + "mlp.gate_proj.weight": (i, h),
                p + "mlp.up_proj.weight": (i, h),
                p + "mlp.down_proj.weight": (h, i),
            }
        )
        if spec.arch == "qwen2":
            shapes.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,)})
            shapes[p + "self_attn.v_proj.bias"] = (kv,)
    shapes["model.norm.weight"] = (h,)
    if not spec.tie_word_embeddings:
        shapes["lm_head.weight"] = (spec.vocab_size, h)
    return shapes


def _write_weights(out: Path, spec: TinyModelSpec) -> None:
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(spec.seed)
    tensors: dict[str, torch.Tensor] = {}
    for name, shape in _weight_shapes(spec).items():
        if name.endswith("norm.weight"):
            value = 1.0 + 0.1 * torch.randn(shape, generator=generator)
        elif name.endswith(".bias"):
            value = 0.1 * torch.randn(shape, generator=generator)
        elif name == "model.embed_tokens.weight":
            value = torch.randn(shape, generator=generator)
        else:
            # Unit-variance activations per layer keep logits spread out (no near-ties).
            value = torch.randn(shape, generator=generator) / shape[1] ** 0.5
        tensors[name] = value.to(getattr(torch, spec.dtype)).contiguous()
    metadata = {"format": "pt"}
    if spec.num_shards == 1:
        save_file(tensors, str(out / "model.safetensors"), metadata=metadata)
        return
    names = list(tensors)
    weight_map: dict[str, str] = {}
    for shard in range(spec.num_shards):
        file_name = f"model-{shard + 1:05d}-of-{spec.num_shards:05d}.safetensors"
        part = names[shard :: spec.num_shards]
        save_file({n: tensors[n] for n in part}, str(out / file_name), metadata=metadata)
        weight_map.update(dict.fromkeys(part, file_name))
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    _write_json(
        out / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map}
    )


def _write_json(path: Path, value: dict[str, Any]) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n")
