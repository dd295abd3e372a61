"""The low-rank deltas of the loaded adapters on one base `Linear`, added to its output for the
rows of the batch that use each adapter.

Per adapter, the pairs of every checkpoint projection fused into the linear are packed once at
load time: the distinct `lora_a`s stacked into one shrink matrix `[in, R]`, the `lora_b`s placed
in one block matrix `[R, out]` (zero where a part is not adapted). A step then costs, per adapter
present in the batch, one gather of its rows, two small matmuls and one scatter-add: the adapters
of a batch are applied group by group (a segmented shrink and expand) over the base matmul that
all rows share.

Under tensor parallelism the pairs are sharded like the linear: a column-parallel linear (q/k/v,
gate/up) keeps its rows of `lora_b`, a row-parallel one (o, down) its columns of `lora_a`, whose
partial delta joins the base output before the all-reduce.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from sglr.model.lora.adapter import LoraWeights


@dataclass(frozen=True)
class LoraRows:
    """Which rows of a step's token stream use which adapter: the index tensor `rows`, or (when
    None) the contiguous range `start:end` (the engine orders a batch's requests by adapter, so
    this is the common case: slices instead of a gather and a scatter)."""

    adapter_id: int
    rows: torch.Tensor | None
    start: int = 0
    end: int = 0


class LoraStep:
    """The adapters of the step being run, shared by every adapted linear of a model (the runner
    sets it around each forward)."""

    def __init__(self) -> None:
        self.groups: tuple[LoraRows, ...] = ()
        # The Triton backend's view: each row's adapter slot (`ModelLoras.slot_ids`; the number
        # of slots for the base model's rows), or None on the torch backend.
        self.row_slots: torch.Tensor | None = None


@dataclass(frozen=True)
class _PackedDelta:
    shrink: torch.Tensor  # [in_features, R]
    expand: torch.Tensor  # [R, out_features]


class LinearLoraDeltas:
    """`shards`: the linear's parts as (checkpoint projection, first output row, rows, first
    checkpoint row this rank holds or None); `col_start`: the first checkpoint column of a
    row-parallel linear (None otherwise)."""

    def __init__(
        self,
        step: LoraStep,
        shards: Sequence[tuple[str, int, int, int | None]],
        in_features: int,
        out_features: int,
        col_start: int | None,
    ) -> None:
        self.step = step
        self.shards = tuple(shards)
        self.projections = tuple(shard[0] for shard in shards)
        self.in_features, self.out_features = in_features, out_features
        self.col_start = col_start
        self._deltas: dict[int, _PackedDelta] = {}
        # The Triton backend's: every loaded adapter's pairs stacked by slot (`restack`).
        self._stacked: tuple[torch.Tensor, torch.Tensor] | None = None

    def add_adapter(
        self, adapter_id: int, pairs: dict[str, LoraWeights], dtype: torch.dtype, device: torch.device
    ) -> None:
        """Packs an adapter's pairs for this linear's parts (`pairs` by projection; parts not in
        it are not adapted)."""
        shrinks: list[torch.Tensor] = []
        a_index: dict[int, int] = {}  # id(lora_a) -> its first column in the packed shrink
        placed: list[tuple[int, int, torch.Tensor, int]] = []
        for projection, out_start, num_rows, ckpt_row in self.shards:
            pair = pairs.get(projection)
            if pair is None:
                continue
            if id(pair.lora_a) not in a_index:  # the parts of a fused projection share one
                a_index[id(pair.lora_a)] = sum(a.shape[0] for a in shrinks)
                lora_a = pair.lora_a
                if self.col_start is not None:
                    lora_a = lora_a.narrow(1, self.col_start, self.in_features)
                shrinks.append(lora_a)
            lora_b = pair.lora_b if ckpt_row is None else pair.lora_b.narrow(0, ckpt_row, num_rows)
            placed.append((out_start, num_rows, lora_b, a_index[id(pair.lora_a)]))
        if not placed:
            return
        # On the CPU small bf16 matmuls run several times slower than fp32 ones (no bf16 GEMM
        # for a few rows): the deltas are computed in fp32 there and rounded once when added.
        if device.type == "cpu":
            dtype = torch.float32
        shrink = torch.cat(shrinks)  # [R, in]
        expand = torch.zeros(self.out_features, shrink.shape[0])
        for out_start, num_rows, lora_b, a_col in placed:
            expand[out_start : out_start + num_rows, a_col : a_col + lora_b.shape[1]] = lora_b
        self._deltas[adapter_id] = _PackedDelta(
            shrink.t().contiguous().to(device=device, dtype=dtype),
            expand.t().contiguous().to(device=device, dtype=dtype),
        )

    def remove_adapter(self, adapter_id: int) -> None:
        self._deltas.pop(adapter_id, None)

    def restack(self, slot_ids: Sequence[int], rank_width: int) -> None:
        """Stacks the pairs of adapters `slot_ids` (slot order) for the Triton kernel: shrink
        `[S, rank_width, in]`, expand `[S, out, rank_width]`, zeros where an adapter has a
        smaller rank or does not adapt this linear."""
        if not self._deltas:
            self._stacked = None
            return
        some = next(iter(self._deltas.values())).shrink
        shrink = some.new_zeros(len(slot_ids), rank_width, self.in_features)
        expand = some.new_zeros(len(slot_ids), self.out_features, rank_width)
        for slot, adapter_id in enumerate(slot_ids):
            delta = self._deltas.get(adapter_id)
            if delta is not None:
                rank = delta.shrink.shape[1]
                shrink[slot, :rank] = delta.shrink.t()
                expand[slot, :, :rank] = delta.expand.t()
        self._stacked = (shrink, expand)

    @property
    def max_rank(self) -> int:
        return max((d.shrink.shape[1] for d in self._deltas.values()), default=0)

    def packed(self, adapter_id: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The adapter's packed pair here, shrink `[in, R]` and expand `[R, out]` (None: it does
        not adapt this linear)."""
        delta = self._deltas.get(adapter_id)
        return None if delta is None else (delta.shrink, delta.expand)

    def has_adapter(self, adapter_id: int) -> bool:
        return adapter_id in self._deltas

    @property
    def num_adapters(self) -> int:
        return len(self._deltas)

    def applies(self) -> bool:
        """Whether this step adds anything here (a batch of the base only does not)."""
        return any(group.adapter_id in self._deltas for group in self.step.groups)

    def add_to(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """`y` (the base output of `x`, this rank's part before any all-reduce) plus each
        adapter's delta on its rows; in place."""
        if self.step.row_slots is not None and self._stacked is not None:
            from sglr.kernels.triton_lora import add_lora_deltas  # CUDA or TRITON_INTERPRET only

            return add_lora_deltas(x, y, *self._stacked, self.step.row_slots)
        for group in self.step.groups:
            delta = self._deltas.get(group.adapter_id)
            if delta is None:
                continue
            rows_x = x[group.start : group.end] if group.rows is None else x.index_select(0, group.rows)
            change = (rows_x.to(delta.shrink.dtype) @ delta.shrink) @ delta.expand
            if group.rows is None:
                y[group.start : group.end] += change.to(y.dtype)
            else:
                y.index_add_(0, group.rows, change.to(y.dtype))
        return y
