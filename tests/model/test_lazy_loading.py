"""Tensor-parallel loading reads each rank's slices of a safetensors checkpoint, not whole tensors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from sglr.model import loader
from sglr.model.build import build_model
from sglr.model.config import load_model_config
from sglr.model.lazy_tensor import LazyTensor
from sglr.model.loader import iter_checkpoint_tensors
from sglr.model.parallel import TensorParallel
from sglr.testing.tiny import write_tiny_model


def test_lazy_tensor_slices_read_only_the_slice() -> None:
    full = torch.arange(24.0).reshape(4, 6)
    reads: list[tuple[slice, ...]] = []

    def read(index: tuple[slice, ...]) -> torch.Tensor:
        reads.append(index)
        return full[index].clone()

    lazy = LazyTensor.whole(read, (4, 6))
    part = lazy.narrow(0, 1, 2).narrow(1, 3, 3)
    assert part.shape == (2, 3) and not reads
    assert torch.equal(part.materialize(), full[1:3, 3:6])
    assert reads == [(slice(1, 3), slice(3, 6))]
    # Anything else reads the whole tensor and acts as it.
    assert torch.equal(lazy.t(), full.t())
    assert torch.equal(torch.cat([lazy.narrow(1, 0, 3), part]), torch.cat([full[:, :3], full[1:3, 3:]]))
    with pytest.raises(IndexError):
        lazy.narrow(0, 3, 2)


def _fake_tp(rank: int) -> TensorParallel:
    return TensorParallel(rank=rank, size=2, group=None, cpu_group=None)  # loading needs no collective


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_a_rank_reads_about_half_of_a_sharded_checkpoint(
    tmp_path: Path, arch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_tiny_model(tmp_path / arch, arch, num_kv_heads=2, tie_word_embeddings=False)
    config = load_model_config(path)
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        full = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
    total_bytes = sum(t.numel() * t.element_size() for t in full.values())
    original = loader._slice_reader
    for rank in (0, 1):
        read_bytes = 0

        def counting_reader(stored, original=original):
            read = original(stored)

            def counted(index: tuple[slice, ...]) -> torch.Tensor:
                nonlocal read_bytes
                out = read(index)
                read_bytes += out.numel() * out.element_size()
                return out

            return counted

        monkeypatch.setattr(loader, "_slice_reader", counting_reader)
        model = build_model(config, torch.float32, torch.device("cpu"), 64, _fake_tp(rank))
        model.load_weights(iter_checkpoint_tensors(path, lazy=True))
        # Only norms are replicated: a rank reads a bit more than half, far less than all.
        assert 0.45 * total_bytes < read_bytes < 0.6 * total_bytes
        params = dict(model.named_parameters())
        attn = model.model.layers[0].self_attn
        q_rows = attn.q_size
        q = full["model.layers.0.self_attn.q_proj.weight"]
        assert torch.equal(
            params["model.layers.0.self_attn.qkv_proj.weight"][:q_rows], q[rank * q_rows :][:q_rows]
        )
        down = full["model.layers.0.mlp.down_proj.weight"]
        cols = down.shape[1] // 2
        assert torch.equal(
            params["model.layers.0.mlp.down_proj.weight"], down[:, rank * cols : (rank + 1) * cols]
        )
        head = full["lm_head.weight"]
        rows = model.lm_head.weight.shape[0]
        start = rank * rows
        expected = head[start : start + rows]
        assert torch.equal(model.lm_head.weight[: expected.shape[0]], expected)
        assert not model.lm_head.weight[expected.shape[0] :].any()
