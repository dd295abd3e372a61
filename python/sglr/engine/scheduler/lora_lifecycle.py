"""`LoraLifecycle`: the adapters a runner serves, changed at run time on the loop thread between
steps (so no forward ever sees its adapter set change under it).

Every loaded adapter is kept in host memory as read (`LoraAdapter`); at most
`max_loras_per_batch` of them are packed on the runner (its device) at once. An adapter is packed
when its first request may join a batch (`LoraAdmission.on_active`), evicting the least recently
used packed adapter that no queued or running request uses (device -> host: its host copy stays,
so the next use packs it again without reading its files). `LoraAdmission` keeps the adapters in
use within the same bound, so there is always one to evict.

An adapter asked to unload while requests still use it stays until the last of them ends
(`LoraAdmission.on_idle`); from the ask on, new requests for it are refused. The front has
already forgotten its name by then, and a later load under that name gets a new id.
"""

from __future__ import annotations

from collections import OrderedDict

from sglr.engine.scheduler.lora_admission import LoraAdmission
from sglr.errors import InvariantError, UnknownLoraError
from sglr.model.lora.adapter import LoraAdapter
from sglr.model.runner import ModelRunner


class LoraLifecycle:
    def __init__(self, runner: ModelRunner, admission: LoraAdmission) -> None:
        self._runner = runner
        self._admission = admission
        self.max_packed = admission.max_loras_per_batch
        self._unloading: set[int] = set()
        self.num_evictions = 0
        loras = runner.loras
        # The adapters loaded at start are packed already; the bound applies from here.
        self._host: dict[int, LoraAdapter] = dict(loras.adapters) if loras is not None else {}
        self._packed: OrderedDict[int, None] = OrderedDict.fromkeys(self._host)  # least recent first
        while len(self._packed) > self.max_packed:
            self._evict_one()
        admission.on_active = self._on_active
        admission.on_idle = self._on_idle

    def refusal(self, lora_id: int) -> UnknownLoraError | None:
        """Why a new request for `lora_id` cannot run (None: it can)."""
        if lora_id == 0 or (lora_id in self._host and lora_id not in self._unloading):
            return None
        return UnknownLoraError(f"the request's LoRA adapter (id {lora_id}) was unloaded", param="lora_path")

    def load(self, lora_id: int, name: str, path: str) -> None:
        """Reads the adapter (`LoraAdapterError` for a bad one) and packs it when there is room."""
        adapter = self._runner.read_lora(name, path)
        self._host[lora_id] = adapter
        if len(self._packed) < self.max_packed:
            self._pack(lora_id)

    def unload(self, lora_id: int) -> bool:
        """Unloads now (True), or when its requests in flight have ended (False)."""
        if self._admission.num_requests(lora_id):
            self._unloading.add(lora_id)
            return False
        self._forget(lora_id)
        return True

    def check_invariants(self) -> None:
        loras = self._runner.loras
        packed = set(loras.adapters) if loras is not None else set()
        if packed != set(self._packed) or not packed <= set(self._host):
            raise InvariantError(
                f"packed adapters {sorted(packed)} != the lifecycle's {sorted(self._packed)}"
            )
        if len(packed) > self.max_packed:
            raise InvariantError(f"{len(packed)} adapters packed, over max_loras_per_batch={self.max_packed}")
        for lora_id in set(self._host) - packed:
            if self._admission.is_active(lora_id):
                raise InvariantError(f"adapter {lora_id} may join a batch but is not packed")
        for lora_id in self._unloading:
            if lora_id not in self._host or not self._admission.num_requests(lora_id):
                raise InvariantError(f"adapter {lora_id} waits to unload with no request using it")
        if loras is not None:
            loras.check_invariants()

    def _on_active(self, lora_id: int) -> None:
        if lora_id in self._packed:
            self._packed.move_to_end(lora_id)
            return
        if len(self._packed) >= self.max_packed:
            self._evict_one()
        self._pack(lora_id)

    def _on_idle(self, lora_id: int) -> None:
        if lora_id in self._unloading:
            self._forget(lora_id)

    def _pack(self, lora_id: int) -> None:
        self._runner.pack_lora(lora_id, self._host[lora_id])
        self._packed[lora_id] = None

    def _evict_one(self) -> None:
        victim = next((i for i in self._packed if not self._admission.is_active(i)), None)
        if victim is None:  # `LoraAdmission` keeps the adapters in use within the bound
            raise InvariantError("every packed adapter is in use: none to evict")
        self._runner.unload_lora(victim)
        del self._packed[victim]
        self.num_evictions += 1

    def _forget(self, lora_id: int) -> None:
        self._unloading.discard(lora_id)
        if lora_id in self._packed:
            del self._packed[lora_id]
            self._runner.unload_lora(lora_id)
        self._host.pop(lora_id, None)
