"""Building blocks shared by the decoder architectures: norms, (fused) linear layers, weight loading.

Parameters are allocated with `torch.empty` (no init pass): they are always overwritten by the
checkpoint or by dummy weights, and initializing an 8B model just to overwrite it wastes minutes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F

from sglr.errors import CheckpointError


class RMSNorm(torch.nn.Module):
    """Root-mean-square norm, computed in fp32 and cast back (as the reference implementation does)."""

    def __init__(self, size: int, eps: float, dtype: torch.dtype) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(size, dtype=dtype), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))
        x32 = x.to(torch.float32)
        variance = x32.pow(2).mean(-1, keepdim=True)
        return self.weight * (x32 * torch.rsqrt(variance + self.eps)).to(x.dtype)


class Linear(torch.nn.Module):
    """`y = x W^T (+ b)`. A fused linear stacks several checkpoint matrices along the output dim;
    `shard_offsets` names each one's row range so the loader can place it."""

    def __init__(
        self,
        in_features: int,
        out_features: Sequence[int] | int,
        bias: bool,
        dtype: torch.dtype,
        shard_names: Sequence[str] = (),
    ) -> None:
        super().__init__()
        sizes = [out_features] if isinstance(out_features, int) else list(out_features)
        self.weight = torch.nn.Parameter(
            torch.empty(sum(sizes), in_features, dtype=dtype), requires_grad=False
        )
        self.bias = (
            torch.nn.Parameter(torch.empty(sum(sizes), dtype=dtype), requires_grad=False) if bias else None
        )
        self.shard_offsets: dict[str, tuple[int, int]] = {}
        start = 0
        for name, size in zip(shard_names, sizes, strict=False):
            self.shard_offsets[name] = (start, size)
            start += size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


# (checkpoint module name, fused module name, shard name) for projections fused at load time.
FUSED_PROJECTIONS = (
    ("q_proj", "qkv_proj", "q"),
    ("k_proj", "qkv_proj", "k"),
    ("v_proj", "qkv_proj", "v"),
    ("gate_proj", "gate_up_proj", "gate"),
    ("up_proj", "gate_up_proj", "up"),
)
# Checkpoint entries that carry no weights (recomputed buffers in some older exports).
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached")


def load_named_weights(
    model: torch.nn.Module, weights: Iterable[tuple[str, torch.Tensor]], ignored_names: Sequence[str] = ()
) -> None:
    """Copies checkpoint tensors into `model`'s parameters (dtype cast on copy).

    Checkpoint names are the Hugging Face ones; `q/k/v_proj` and `gate/up_proj` land in their
    fused parameter's row range. Raises `CheckpointError` for an unknown name, a shape mismatch
    or a parameter that no tensor filled.
    """
    params = dict(model.named_parameters())
    modules = dict(model.named_modules())
    expected: set[tuple[str, str | None]] = set()
    for name, param in params.items():
        owner = modules[name.rsplit(".", 1)[0]] if "." in name else model
        shards = getattr(owner, "shard_offsets", {}) or {None: (0, param.shape[0])}
        expected.update((name, shard) for shard in shards)
    loaded: set[tuple[str, str | None]] = set()
    for name, tensor in weights:
        if name in ignored_names or name.endswith(_IGNORED_SUFFIXES):
            continue
        target, shard = _map_name(name)
        param = params.get(target)
        if param is None:
            raise CheckpointError(f"checkpoint tensor {name!r} has no matching parameter")
        rows = param.data
        if shard is not None:
            owner = modules[target.rsplit(".", 1)[0]]
            start, size = owner.shard_offsets[shard]
            rows = rows[start : start + size]
        if tuple(rows.shape) != tuple(tensor.shape):
            raise CheckpointError(
                f"{name}: checkpoint shape {tuple(tensor.shape)} != model {tuple(rows.shape)}"
            )
        with torch.no_grad():
            rows.copy_(tensor)
        loaded.add((target, shard))
    missing = sorted(f"{name}[{shard}]" if shard else name for name, shard in expected - loaded)
    if missing:
        shown = ", ".join(missing[:5])
        raise CheckpointError(
            f"checkpoint lacks {len(missing)} weights: {shown}{' ...' if len(missing) > 5 else ''}"
        )


def _map_name(name: str) -> tuple[str, str | None]:
    for part, fused, shard in FUSED_PROJECTIONS:
        marker = f".{part}."
        if marker in name:
            return name.replace(marker, f".{fused}."), shard
    return name, None
