"""The models the profiles run: the tiny test model (CPU) or Llama-3-8B shapes with dummy weights (GPU).

Both are built locally (no downloads). The Llama-3-8B directory holds the real config shape and
the tiny model's tokenizer (a few thousand tokens): the engine loads random weights
(`load_format="dummy"`), and ids past the tokenizer's vocabulary decode to nothing, which does not
change the work done per token.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

#: Seeded test models by name (`sglr.testing.tiny.TinyModelSpec` overrides), all with room for the
#: multi-turn-long workload (4 turns of up to 512 + 512 tokens).
TINY_MODELS = {
    # The 64-wide test model: fastest; the smoke profile runs it.
    "tiny": {"max_position_embeddings": 8192},
    # 256 wide, 4 layers (~5M parameters): the CPU profile. On the 64-wide model the engine's
    # per-request and per-step Python work outweighs the model's compute (see benches/README.md),
    # which understates what the cache saves on a GPU, where the model's compute dominates.
    "tiny-wide": {
        "max_position_embeddings": 8192,
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_layers": 4,
        "num_heads": 8,
        "num_kv_heads": 2,
    },
}
DUMMY_TOKENIZER_VOCAB = 4096


def tiny_model_dir(name: str) -> str:
    from sglr.testing.tiny import tiny_model_path

    return str(tiny_model_path("llama", **TINY_MODELS[name]))


def dummy_model_dir(preset_name: str) -> str:
    """A config-and-tokenizer directory for a `benches/model_gpu.py` preset (built once, cached)."""
    from model_gpu import PRESETS
    from sglr.envs import cache_dir
    from sglr.testing.tiny import write_tiny_model

    preset = PRESETS[preset_name]
    target = cache_dir() / "bench-models" / f"{preset_name}-dummy"
    if (target / "config.json").is_file():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built aside and renamed, so an interrupted build never leaves a half-written directory.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        # The tiny model's tokenizer files, then the preset's shape in place of its config and weights.
        write_tiny_model(staging, "llama", vocab_size=DUMMY_TOKENIZER_VOCAB)
        tiny_config = json.loads((staging / "config.json").read_text())
        token_ids = {key: tiny_config[key] for key in ("bos_token_id", "eos_token_id", "pad_token_id")}
        (staging / "model.safetensors").unlink()
        (staging / "config.json").write_text(json.dumps({**preset, **token_ids}, indent=2))
        with contextlib.suppress(OSError):  # another process finished first: same files
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(target)


def load_transformers(model_dir: str, device: str, dummy_preset: str | None) -> tuple[Any, Any]:
    """(model, tokenizer) for the transformers baseline: the checkpoint's weights, or random
    weights of the preset's shape built directly on the device in bf16."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if dummy_preset is not None:
        from model_gpu import PRESETS, hf_model

        model = hf_model(PRESETS[dummy_preset], torch.device(device))
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).to(device).eval()
    return model, tokenizer
