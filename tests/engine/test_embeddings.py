"""Embedding mode (`is_embedding`): pooled final hidden states against `transformers`.

The reference is `AutoModel`'s last hidden state (after the final norm) in float64, pooled and
normalized as declared; the tolerance scales with how far float32 `transformers` itself lands
from that reference on this machine, not a constant tuned on one CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sglr.engine.engine import Engine
from sglr.errors import EngineConfigError, InvalidRequestError
from sglr.model.pooling import Pooling, read_pooling
from sglr.testing.tiny import tiny_model_path, write_tiny_model

PROMPTS = [list(range(5, 25)), [7, 300, 12, 9, 44, 1000, 3], list(range(100, 137))]


def write_sentence_transformers_layout(model_dir: Path, mode: str, normalize: bool) -> Path:
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append(
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        )
    (model_dir / "modules.json").write_text(json.dumps(modules))
    (model_dir / "1_Pooling").mkdir(exist_ok=True)
    config = {
        "word_embedding_dimension": 64,
        "pooling_mode_cls_token": False,
        "pooling_mode_max_tokens": False,
    }
    config |= {"pooling_mode_mean_tokens": mode == "mean", "pooling_mode_lasttoken": mode == "last"}
    (model_dir / "1_Pooling" / "config.json").write_text(json.dumps(config))
    return model_dir


@pytest.fixture(scope="module")
def mean_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_tiny_model(tmp_path_factory.mktemp("st") / "llama", "llama", seed=3)
    return write_sentence_transformers_layout(path, "mean", normalize=True)


def hf_embeddings(path: Path, prompts: list[list[int]], pooling: Pooling, dtype: torch.dtype) -> np.ndarray:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path, torch_dtype=dtype).eval()
    rows = []
    with torch.no_grad():
        for ids in prompts:
            hidden = model(torch.tensor([ids])).last_hidden_state[0]
            vector = hidden.mean(0) if pooling.mode == "mean" else hidden[-1]
            if pooling.normalize:
                vector = torch.nn.functional.normalize(vector, dim=0)
            rows.append(vector.double().numpy())
    return np.stack(rows)


def assert_matches_transformers(path: Path, got: np.ndarray, prompts: list[list[int]]) -> float:
    """Returns the tolerance it used (float32 rounding differences elsewhere stay within it)."""
    pooling = read_pooling(path)
    reference = hf_embeddings(path, prompts, pooling, torch.float64)
    hf32_error = np.abs(hf_embeddings(path, prompts, pooling, torch.float32) - reference).max()
    tolerance = 50 * hf32_error + 8 * np.finfo(np.float32).eps
    assert np.abs(got - reference).max() <= tolerance
    return float(tolerance)


def encode_all(engine: Engine, prompts: list[list[int]]) -> np.ndarray:
    return np.array([r["embedding"] for r in engine.encode(input_ids=prompts)])


def test_reads_the_declared_pooling(tmp_path: Path) -> None:
    assert read_pooling(tmp_path) == Pooling("last", True)  # no modules.json: last token + L2
    write_sentence_transformers_layout(tmp_path, "mean", normalize=False)
    assert read_pooling(tmp_path) == Pooling("mean", False)
    write_sentence_transformers_layout(tmp_path, "last", normalize=True)
    assert read_pooling(tmp_path) == Pooling("last", True)
    config = json.loads((tmp_path / "1_Pooling" / "config.json").read_text())
    config |= {"pooling_mode_lasttoken": False, "pooling_mode_cls_token": True}
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    with pytest.raises(EngineConfigError, match="pooling_mode_cls_token"):
        read_pooling(tmp_path)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_last_token_default_matches_transformers(arch: str) -> None:
    path = tiny_model_path(arch)
    with Engine(str(path), device="cpu", is_embedding=True, debug_invariants=True) as engine:
        batched = encode_all(engine, PROMPTS)
        alone = np.array([engine.encode(input_ids=p)["embedding"] for p in PROMPTS])
        assert engine.embedding_model.dimensions == batched.shape[1] == 64
    tolerance = assert_matches_transformers(path, batched, PROMPTS)
    assert_matches_transformers(path, alone, PROMPTS)
    assert np.abs(batched - alone).max() <= tolerance  # batch = alone, up to float32 rounding


def test_declared_mean_pooling_chunked_and_cached(mean_dir: Path) -> None:
    """Mean pooling across prefill chunks; a prompt whose prefix is cached pools the same."""
    texts = ["the quick brown fox jumps over the lazy dog", "hello"]
    with Engine(str(mean_dir), device="cpu", is_embedding=True, chunked_prefill_size=6) as engine:
        ids = [engine.tokenizer.encode(t) for t in texts]
        chunked = np.array([r["embedding"] for r in engine.encode(texts)])
        again = engine.encode(input_ids=ids[0] + [50, 60])  # shares the first prompt's prefix
        assert again["meta_info"]["cached_tokens"] == 0
        alone = engine.encode(texts[0])["embedding"]
    tolerance = assert_matches_transformers(mean_dir, chunked, ids)
    assert np.abs(chunked[0] - alone).max() <= tolerance
    assert_matches_transformers(mean_dir, np.array([again["embedding"]]), [ids[0] + [50, 60]])
    with Engine(str(mean_dir), device="cpu", is_embedding=True) as whole:
        assert np.abs(encode_all(whole, ids) - chunked).max() <= tolerance


def test_generation_and_embedding_refuse_the_other_mode(tiny_dir: Path) -> None:
    with (
        Engine(str(tiny_dir), device="cpu", is_embedding=True) as engine,
        pytest.raises(InvalidRequestError, match="serves embeddings"),
    ):
        engine.generate("hi", {"max_new_tokens": 2})
    with Engine(str(tiny_dir), device="cpu") as engine:
        assert not engine.is_embedding
        with pytest.raises(InvalidRequestError, match="is_embedding"):
            engine.encode("hi")


def test_worker_processes_embed_as_in_process(tiny_dir: Path) -> None:
    """The chunk parts cross from the worker pickled (`TokenOutput.embedding_parts`)."""
    prompts = [[5, 9, 300, 41], [77, 12, 8]]
    with Engine(str(tiny_dir), device="cpu", is_embedding=True) as here:
        expected = encode_all(here, prompts)
    with Engine(str(tiny_dir), device="cpu", is_embedding=True, multiprocess=True) as workers:
        got = encode_all(workers, prompts)
    # A worker may run torch with another thread count: float32 rounding, nothing more.
    tolerance = assert_matches_transformers(tiny_dir, expected, prompts)
    assert np.abs(got - expected).max() <= tolerance
