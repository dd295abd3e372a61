"""Building blocks shared by the decoder architectures: norms, (fused) linear layers, weight loading.

Parameters are allocated with `torch.empty` (no init pass): they are always overwritten by the
checkpoint or by dummy weights, and initializing an 8B model just to overwrite it wastes minutes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

import torch
import torch.nn.functional as F

from sglr.errors import CheckpointError
from sglr.kernels import cpu_norm
from sglr.kernels.cpu_linear import pack_weight, packed_linear
from sglr.kernels.cpu_q8 import Q8Weight, q8_logits, q8_rows
from sglr.kernels.cpu_quantized import integer_matmul, quantized_linear, quantized_rows
from sglr.kernels.fp8_linear import Fp8Weight, fp8_linear
from sglr.model.lazy_tensor import LazyTensor, materialize
from sglr.model.parallel import TensorParallel, vocab_shard


class RMSNorm(torch.nn.Module):
    """Root-mean-square norm, computed in fp32 and cast back (as the reference implementation does)."""

    def __init__(self, size: int, eps: float, dtype: torch.dtype) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(size, dtype=dtype), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One fused op for `x * rsqrt(mean(x^2) + eps)` instead of five.
        shape = (x.shape[-1],)
        if cpu_norm.kernel_applies(x, self.weight):
            return cpu_norm.rms_norm(x, self.weight, self.eps)
        # On bf16 / fp16 input, rms_norm accumulates in fp32 and rounds once to the input dtype:
        # the same values as normalizing an fp32 copy and casting back (two ops fewer).
        return self.weight * F.rms_norm(x, shape, eps=self.eps)


class OffsetRMSNorm(torch.nn.Module):
    """RMSNorm whose weight is an offset from 1 (Gemma): normalized and scaled in fp32, then cast
    back."""

    def __init__(self, size: int, eps: float, dtype: torch.dtype) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.zeros(size, dtype=dtype), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)


# `DecoderOptions.norm` -> the norm module.
NORMS: dict[str, type[torch.nn.Module]] = {"rms": RMSNorm, "offset": OffsetRMSNorm}


class Linear(torch.nn.Module):
    """`y = x W^T (+ b)`. A fused linear stacks several checkpoint matrices along the output dim;
    `shard_offsets` names each one's row range so the loader can place it.

    Under tensor parallelism the sizes are this rank's: `row_starts` gives, per shard, the first
    checkpoint row the rank holds (column-parallel); `col_start` the first checkpoint column of
    a row-parallel linear, whose partial outputs are summed over the ranks of `reduce` (the bias
    is added once, after the sum).
    """

    def __init__(
        self,
        in_features: int,
        out_features: Sequence[int] | int,
        bias: bool,
        dtype: torch.dtype,
        shard_names: Sequence[str] = (),
        row_starts: Sequence[int] = (),
        col_start: int | None = None,
        reduce: TensorParallel | None = None,
    ) -> None:
        super().__init__()
        self.row_starts = dict(zip(shard_names or [None], row_starts, strict=False))
        self.col_start = col_start
        self.reduce = reduce
        sizes = [out_features] if isinstance(out_features, int) else list(out_features)
        self.in_features, self.out_features = in_features, sum(sizes)
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
        # Opt-in (models set it): CPU forwards multiply by a copy of the weight prepacked at the
        # first one, after loading (`sglr.kernels.cpu_linear`; a second copy in host memory).
        self.prepack_on_cpu = False
        self._cpu_pack: torch.Tensor | None = None
        # Set by `use_quantized`: the weight kept as quantized blocks (`sglr._core.GgufMatrix`,
        # CPU) instead.
        self.quantized = None
        # Set by `use_fp8`: the weight as e4m3 values and scales (`sglr.kernels.fp8_linear`).
        self.fp8: Fp8Weight | None = None
        # Set when the runner serves LoRA adapters (`sglr.model.lora.linear_delta.LinearLoraDeltas`):
        # their deltas on this linear, for the rows of the step that use them.
        self.lora = None

    def use_quantized(self, matrix) -> None:
        """Replaces the dense weight (which is dropped: not a parameter to load any more) by a
        `sglr._core.GgufMatrix`."""
        if self.reduce is not None or self.row_starts:
            raise ValueError("quantized weights are not supported under tensor parallelism")
        shape = (matrix.rows, matrix.cols)
        if shape != (self.out_features, self.in_features):
            raise ValueError(f"quantized weight {shape} != {(self.out_features, self.in_features)}")
        self.quantized = matrix
        self.register_parameter("weight", None)

    def use_fp8(self, weight: Fp8Weight) -> None:
        """Replaces the dense weight (dropped, as by `use_quantized`) by fp8 values and scales of
        this rank's shape (tensor parallelism: sliced before quantizing, or with their rows)."""
        if weight.shape != (self.out_features, self.in_features):
            raise ValueError(f"fp8 weight {weight.shape} != {(self.out_features, self.in_features)}")
        self.fp8 = weight
        self.register_parameter("weight", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lora = self.lora
        if lora is not None and lora.applies():
            return self._forward_with_lora(x, lora)
        if self.fp8 is not None:
            y = fp8_linear(x, self.fp8)
            y = y if self.reduce is None else self.reduce.all_reduce(y)
            return y if self.bias is None else y + self.bias
        if self.quantized is not None:
            y = quantized_linear(x, self.quantized)
            return y if self.bias is None else y + self.bias
        if self.prepack_on_cpu and x.device.type == "cpu":
            return self._forward_prepacked(x)
        if self.reduce is None:
            return F.linear(x, self.weight, self.bias)
        y = self.reduce.all_reduce(F.linear(x, self.weight))
        return y if self.bias is None else y + self.bias

    def _forward_with_lora(self, x: torch.Tensor, lora) -> torch.Tensor:
        """The base output (bias included, as without adapters, unless an all-reduce comes
        first) plus the adapters' deltas; a row-parallel rank adds its partial delta before the
        all-reduce."""
        bias_now = self.bias if self.reduce is None else None
        if self.quantized is not None or self.fp8 is not None:
            y = quantized_linear(x, self.quantized) if self.fp8 is None else fp8_linear(x, self.fp8)
            y = y if bias_now is None else y + bias_now
        elif self.prepack_on_cpu and x.device.type == "cpu":
            if self._cpu_pack is None:
                self._cpu_pack = pack_weight(self.weight)
            y = packed_linear(x, self.weight, self._cpu_pack)
            y = y if bias_now is None else y + bias_now
        else:
            y = F.linear(x, self.weight, bias_now)
        y = lora.add_to(x, y)
        if self.reduce is None:
            return y
        y = self.reduce.all_reduce(y)
        return y if self.bias is None else y + self.bias

    def _forward_prepacked(self, x: torch.Tensor) -> torch.Tensor:
        if self._cpu_pack is None:
            self._cpu_pack = pack_weight(self.weight)
        y = packed_linear(x, self.weight, self._cpu_pack)
        if self.reduce is not None:
            y = self.reduce.all_reduce(y)
        return y if self.bias is None else y + self.bias

    def checkpoint_slice(self, shard: str | None, tensor: torch.Tensor, is_bias: bool) -> torch.Tensor:
        """The part of a checkpoint tensor this rank holds."""
        rows = self.shard_offsets[shard][1] if shard is not None else self.out_features
        start = self.row_starts.get(shard)
        if start is not None and (not is_bias or self.reduce is None):
            tensor = tensor.narrow(0, start, rows)
        if self.col_start is not None and not is_bias:
            tensor = tensor.narrow(1, self.col_start, self.in_features)
        return tensor


class VocabParallelEmbedding(torch.nn.Module):
    """Token embeddings; under tensor parallelism each rank holds a slice of the vocabulary
    (zero rows pad the last one) and the lookups are summed over the ranks."""

    def __init__(
        self, vocab_size: int, hidden_size: int, dtype: torch.dtype, tp: TensorParallel | None
    ) -> None:
        super().__init__()
        self.tp = tp
        self.dtype = dtype
        self.vocab_size = vocab_size
        self.vocab_start, rows = vocab_shard(vocab_size, tp.rank, tp.size) if tp else (0, vocab_size)
        self.weight = torch.nn.Parameter(torch.empty(rows, hidden_size, dtype=dtype), requires_grad=False)
        # Opt-in, as `Linear.prepack_on_cpu`: the head's CPU matmul on a prepacked copy.
        self.prepack_on_cpu = False
        self._cpu_pack: torch.Tensor | None = None
        # Set by `use_q8`: the rows as 8-bit blocks (CPU) instead of dense ones.
        self.q8: Q8Weight | None = None
        # Set by `use_quantized`: the rows as a GGUF file's blocks (`sglr._core.GgufMatrix`, CPU).
        self.quantized = None

    def use_q8(self, weight: Q8Weight) -> None:
        """Replaces the dense rows (dropped: not a parameter to load any more) by 8-bit ones.
        A lookup dequantizes the rows it needs, which gives the values a dense copy converted
        from the same blocks holds; logits multiply the 8-bit rows (`q8_logits`)."""
        if self.tp is not None:
            raise ValueError("an 8-bit head is not supported under tensor parallelism")
        if weight.shape != tuple(self.weight.shape):
            raise ValueError(f"Q8 head {weight.shape} != {tuple(self.weight.shape)}")
        self.q8 = weight
        self.register_parameter("weight", None)

    def use_quantized(self, matrix) -> None:
        """As `use_q8` for a `sglr._core.GgufMatrix` (K-quants, 4- and 5-bit blocks): lookups
        dequantize their rows; logits multiply the blocks with int8 activations."""
        if self.tp is not None:
            raise ValueError("a quantized head is not supported under tensor parallelism")
        if (matrix.rows, matrix.cols) != tuple(self.weight.shape):
            raise ValueError(f"quantized head {(matrix.rows, matrix.cols)} != {tuple(self.weight.shape)}")
        self.quantized = matrix
        self.register_parameter("weight", None)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if self.q8 is not None:
            return q8_rows(self.q8, input_ids.cpu().numpy()).to(self.dtype)
        if self.quantized is not None:
            return quantized_rows(self.quantized, input_ids.cpu().numpy()).to(self.dtype)
        if self.tp is None:
            return F.embedding(input_ids, self.weight)
        local = input_ids - self.vocab_start
        outside = (local < 0) | (local >= self.weight.shape[0])
        out = F.embedding(local.masked_fill(outside, 0), self.weight)
        return self.tp.all_reduce(out.masked_fill(outside[:, None], 0.0))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits over the whole vocabulary, using these rows as the output head."""
        if self.q8 is not None:
            return q8_logits(hidden, self.q8)
        if self.quantized is not None:
            return integer_matmul(hidden, self.quantized, self.quantized.rows)
        if self.prepack_on_cpu and hidden.device.type == "cpu":
            if self._cpu_pack is None:
                self._cpu_pack = pack_weight(self.weight)
            logits = packed_linear(hidden, self.weight, self._cpu_pack).float()
        else:
            logits = F.linear(hidden, self.weight).float()
        if self.tp is None:
            return logits
        return self.tp.all_gather_last(logits)[:, : self.vocab_size]

    def checkpoint_slice(self, shard: str | None, tensor: torch.Tensor, is_bias: bool) -> torch.Tensor:
        if self.tp is None:
            return tensor
        if tensor.shape[0] != self.vocab_size:
            raise CheckpointError(
                f"checkpoint has {tensor.shape[0]} vocabulary rows, the model {self.vocab_size}"
            )
        rows = self.weight.shape[0]
        part = materialize(tensor.narrow(0, self.vocab_start, min(rows, self.vocab_size - self.vocab_start)))
        if part.shape[0] < rows:  # the padding rows of the last rank
            part = torch.cat([part, part.new_zeros(rows - part.shape[0], *part.shape[1:])])
        return part


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
    model: torch.nn.Module,
    weights: Iterable[tuple[str, torch.Tensor | LazyTensor]],
    ignored_names: Sequence[str] = (),
    loaded_elsewhere: Collection[str] = (),
) -> None:
    """Copies checkpoint tensors into `model`'s parameters (dtype cast on copy). A `LazyTensor`
    is read after the rank's slice of it is taken.

    Checkpoint names are the Hugging Face ones; `q/k/v_proj` and `gate/up_proj` land in their
    fused parameter's row range. Raises `CheckpointError` for an unknown name, a shape mismatch
    or a parameter that no tensor filled. `loaded_elsewhere` names parameters another loader
    fills (stacked expert weights), which are neither expected nor targets here.
    """
    params = {name: p for name, p in model.named_parameters() if name not in loaded_elsewhere}
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
        owner = modules[target.rsplit(".", 1)[0]] if "." in target else model
        if shard is not None:
            start, size = owner.shard_offsets[shard]
            rows = rows[start : start + size]
        slicer = getattr(owner, "checkpoint_slice", None)
        if slicer is not None:
            try:
                tensor = slicer(shard, tensor, target.endswith("bias"))
            except (IndexError, RuntimeError) as exc:  # narrower than this rank's slice
                raise CheckpointError(
                    f"{name}: checkpoint shape {tuple(tensor.shape)} does not split: {exc}"
                ) from exc
        if tuple(rows.shape) != tuple(tensor.shape):
            raise CheckpointError(
                f"{name}: checkpoint shape {tuple(tensor.shape)} != model {tuple(rows.shape)}"
            )
        with torch.no_grad():
            rows.copy_(materialize(tensor))
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
