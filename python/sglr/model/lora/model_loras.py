"""`ModelLoras`: the adapters a runner has loaded, the one owner of their weights on its device.

It attaches a `LinearLoraDeltas` to every adaptable projection of the model (q/k/v, o, gate/up
and down of each layer with a gated MLP), packs an adapter into them at `load`, drops it at
`unload`, and around each forward tells them which rows use which adapter (`begin` / `end`).
Adapter ids are the engine's (stable: a name loaded again gets a new id); 0 is the base model.

A step that applies the adapters itself (the fused CPU decode step) listens (`set_listener`):
it gets every loaded adapter's packed pairs, layer by layer, and is told of each unload.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from sglr.errors import BatchError, LoraAdapterError
from sglr.model.feed_forward import GatedMLP
from sglr.model.layers import Linear
from sglr.model.lora.adapter import LoraAdapter
from sglr.model.lora.linear_delta import LinearLoraDeltas, LoraRows, LoraStep

BASE_ADAPTER_ID = 0
LORA_BACKENDS = ("torch", "triton")

# (checkpoint projection, the module path from the layer, the shard of the fused linear)
_PROJECTION_TARGETS = {
    "q_proj": ("self_attn.qkv_proj", "q"),
    "k_proj": ("self_attn.qkv_proj", "k"),
    "v_proj": ("self_attn.qkv_proj", "v"),
    "o_proj": ("self_attn.o_proj", None),
    "gate_proj": ("ffn.gate_up_proj", "gate"),
    "up_proj": ("ffn.gate_up_proj", "up"),
    "down_proj": ("ffn.down_proj", None),
}
# The linears of a layer a listener gets, in this order.
LISTENER_LINEARS = ("self_attn.qkv_proj", "self_attn.o_proj", "ffn.gate_up_proj", "ffn.down_proj")

# Per layer, per `LISTENER_LINEARS` entry: the packed (shrink [in, R], expand [R, out]) or None.
PackedLayers = list[tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]]


class LoraListener(Protocol):
    def add_adapter(self, adapter_id: int, layers: PackedLayers) -> None: ...

    def remove_adapter(self, adapter_id: int) -> None: ...


class ModelLoras:
    """`backend`: "torch" (grouped matmuls, adapter by adapter), "triton" (one segmented shrink
    and expand per linear over all adapters stacked by slot, `kernels/triton_lora.py`) or
    "auto" (triton on CUDA, torch elsewhere)."""

    def __init__(
        self, model: torch.nn.Module, dtype: torch.dtype, device: torch.device, backend: str = "torch"
    ) -> None:
        if backend == "auto":
            backend = "triton" if device.type == "cuda" else "torch"
        if backend not in LORA_BACKENDS:
            raise ValueError(f"lora backend must be one of {LORA_BACKENDS}, got {backend!r}")
        self.dtype, self.device, self.backend = dtype, device, backend
        self.slot_ids: list[int] = []  # the Triton backend's slots: adapter ids in slot order
        self.step = LoraStep()
        self.adapters: dict[int, LoraAdapter] = {}
        # (layer id, linear path) -> the linear's deltas
        self._linears: dict[tuple[int, str], LinearLoraDeltas] = {}
        self._num_layers = len(model.model.layers)
        for layer_id, layer in enumerate(model.model.layers):
            for path in dict.fromkeys(target for target, _ in _PROJECTION_TARGETS.values()):
                if path.startswith("ffn.") and not isinstance(layer.ffn, GatedMLP):
                    continue  # a mixture-of-experts block: not adaptable
                linear = _module_at(layer, path)
                deltas = _deltas_for(linear, path, self.step)
                linear.lora = deltas
                self._linears[(layer_id, path)] = deltas
        self.listener: LoraListener | None = None

    def set_listener(self, listener: LoraListener) -> None:
        """`listener` gets the loaded adapters now and every later load and unload."""
        for adapter_id in self.adapters:
            listener.add_adapter(adapter_id, self.packed_layers(adapter_id))
        self.listener = listener

    def packed_layers(self, adapter_id: int) -> PackedLayers:
        """The adapter's packed pairs on each layer's `LISTENER_LINEARS`."""
        return [
            tuple(
                None if (deltas := self._linears.get((layer_id, path))) is None else deltas.packed(adapter_id)
                for path in LISTENER_LINEARS
            )
            for layer_id in range(self._num_layers)
        ]

    def load(self, adapter_id: int, adapter: LoraAdapter) -> None:
        """Packs `adapter`'s pairs into the linears (raises `LoraAdapterError` for a projection
        this model cannot adapt; nothing stays loaded then)."""
        if adapter_id == BASE_ADAPTER_ID or adapter_id in self.adapters:
            raise LoraAdapterError(f"adapter id {adapter_id} is taken")
        by_linear: dict[tuple[int, str], dict] = {}
        for (layer_id, projection), pair in adapter.weights.items():
            path, _ = _PROJECTION_TARGETS[projection]
            if (layer_id, path) not in self._linears:
                raise LoraAdapterError(
                    f"adapter {adapter.name!r}: layers.{layer_id}.{projection} is not adaptable here"
                )
            by_linear.setdefault((layer_id, path), {})[projection] = pair
        try:
            for key, pairs in by_linear.items():
                self._linears[key].add_adapter(adapter_id, pairs, self.dtype, self.device)
            if self.listener is not None:
                self.listener.add_adapter(adapter_id, self.packed_layers(adapter_id))
        except BaseException:
            self._drop(adapter_id)
            raise
        self.adapters[adapter_id] = adapter
        self._restack()

    def unload(self, adapter_id: int) -> None:
        self._drop(adapter_id)
        if self.adapters.pop(adapter_id, None) is not None and self.listener is not None:
            self.listener.remove_adapter(adapter_id)
        self._restack()

    def _restack(self) -> None:
        if self.backend != "triton":
            return
        self.slot_ids = sorted(self.adapters)
        max_rank = max((d.max_rank for d in self._linears.values()), default=1)
        width = -(-max_rank // 16) * 16  # the kernel's dots need multiples of 16
        for deltas in self._linears.values():
            deltas.restack(self.slot_ids, width)

    def check_ids(self, token_adapter_ids: np.ndarray) -> np.ndarray:
        """The distinct adapters of a step's rows, the base left out (`BatchError` for one that
        is not loaded)."""
        ids = np.unique(token_adapter_ids)
        ids = ids[ids != BASE_ADAPTER_ID]
        unknown = [int(i) for i in ids if int(i) not in self.adapters]
        if unknown:
            raise BatchError(f"adapter ids {unknown} are not loaded")
        return ids

    def begin(self, token_adapter_ids: np.ndarray | None) -> None:
        """The step's rows (its token stream's) by adapter; None or all 0: the base alone."""
        self.step.row_slots = None
        if token_adapter_ids is None:
            self.step.groups = ()
            return
        ids = self.check_ids(token_adapter_ids)
        groups = []
        for adapter_id in ids.tolist():
            rows = np.flatnonzero(token_adapter_ids == adapter_id)
            start, end = int(rows[0]), int(rows[-1]) + 1
            if end - start == rows.size:  # one run of rows: a slice
                groups.append(LoraRows(adapter_id, None, start, end))
            else:
                groups.append(LoraRows(adapter_id, torch.from_numpy(rows).to(self.device)))
        self.step.groups = tuple(groups)
        if self.backend == "triton":
            slot_ids = np.array(self.slot_ids, dtype=np.int64)
            slots = np.searchsorted(slot_ids, token_adapter_ids)
            slots[token_adapter_ids == BASE_ADAPTER_ID] = len(slot_ids)
            self.step.row_slots = torch.from_numpy(slots).to(self.device)

    def end(self) -> None:
        self.step.groups = ()
        self.step.row_slots = None

    def check_invariants(self) -> None:
        """Every linear holds exactly the loaded adapters that adapt one of its projections."""
        for (layer_id, _path), deltas in self._linears.items():
            for adapter_id, adapter in self.adapters.items():
                adapts = any((layer_id, p) in adapter.weights for p in deltas.projections)
                if deltas.has_adapter(adapter_id) != adapts:
                    raise AssertionError(f"adapter {adapter_id} packed wrongly at layer {layer_id}")
            if deltas.num_adapters > len(self.adapters):
                raise AssertionError(f"layer {layer_id} holds an unloaded adapter")

    def _drop(self, adapter_id: int) -> None:
        for deltas in self._linears.values():
            deltas.remove_adapter(adapter_id)


def _module_at(layer: torch.nn.Module, path: str) -> Linear:
    module = layer
    for part in path.split("."):
        module = getattr(module, part)
    assert isinstance(module, Linear)
    return module


def _deltas_for(linear: Linear, path: str, step: LoraStep) -> LinearLoraDeltas:
    shards = []
    for projection, (target, shard) in _PROJECTION_TARGETS.items():
        if target != path:
            continue
        if shard is None:
            shards.append((projection, 0, linear.out_features, None))
        else:
            out_start, num_rows = linear.shard_offsets[shard]
            shards.append((projection, out_start, num_rows, linear.row_starts.get(shard)))
    return LinearLoraDeltas(step, shards, linear.in_features, linear.out_features, linear.col_start)
