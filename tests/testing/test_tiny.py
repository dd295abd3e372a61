"""The tiny-model factory: deterministic, loadable by transformers, a working chat tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglr.model.config import load_model_config
from sglr.testing.tiny import TinyModelSpec, tiny_model_path, write_tiny_model


def test_same_arguments_write_identical_files(tmp_path: Path) -> None:
    a = write_tiny_model(tmp_path / "a", "qwen2", seed=5)
    b = write_tiny_model(tmp_path / "b", "qwen2", seed=5)
    names = sorted(p.name for p in a.iterdir())
    assert names == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    c = write_tiny_model(tmp_path / "c", "qwen2", seed=6)
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()


def test_cached_path_is_reused_and_keyed_by_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLR_CACHE_DIR", str(tmp_path))
    first = tiny_model_path("llama")
    mtime = (first / "model.safetensors").stat().st_mtime_ns
    assert tiny_model_path("llama") == first
    assert (first / "model.safetensors").stat().st_mtime_ns == mtime
    assert tiny_model_path("llama", seed=1) != first
    assert first.parent.parent == tmp_path
    assert not [p for p in first.parent.iterdir() if p.name.startswith(".")]  # no staging left over


def test_config_matches_spec_and_tokenizer_size() -> None:
    path = tiny_model_path("qwen2")
    config = load_model_config(path)
    spec = TinyModelSpec(arch="qwen2")
    tokenizer = json.loads((path / "tokenizer.json").read_text())
    assert config.architecture == "Qwen2ForCausalLM" and config.attention_bias
    assert (
        config.vocab_size
        == spec.vocab_size
        == len(tokenizer["model"]["vocab"])
        + len([t for t in tokenizer["added_tokens"] if t["content"] not in tokenizer["model"]["vocab"]])
    )
    assert (config.num_attention_heads, config.num_key_value_heads) == (spec.num_heads, spec.num_kv_heads)


def test_transformers_tokenizer_round_trips_text_and_applies_chat_template() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path("llama"))
    text = 'def f(x):\n    """Return {"ok": true} — ünïcode 🙂."""\n    return x'
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert len(ids) < len(text.encode()) / 2  # merges learned from Python source compress it
    chat = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert (
        chat
        == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert tokenizer.eos_token_id == im_end
    assert tokenizer.encode("<|im_end|>") == [im_end]


def test_bad_spec_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="arch"):
        write_tiny_model(tmp_path, "gpt2")
    with pytest.raises(ValueError, match="num_kv_heads"):
        write_tiny_model(tmp_path, "llama", num_heads=4, num_kv_heads=3)
