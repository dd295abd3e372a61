"""`LoraLifecycle`: adapters loaded into and unloaded from the runner at run time, on the loop
thread between steps (so no forward ever sees an adapter set change under it).

An adapter asked to unload while requests still use it stays on the runner until the last of
them ends (`LoraAdmission.on_idle`); from the ask on, new requests for it are refused. The
front has already forgotten its name by then, and a later load under that name gets a new id.
"""

from __future__ import annotations

from sglr.engine.scheduler.lora_admission import LoraAdmission
from sglr.errors import UnknownLoraError
from sglr.model.runner import ModelRunner


class LoraLifecycle:
    def __init__(self, runner: ModelRunner, admission: LoraAdmission) -> None:
        self._runner = runner
        self._admission = admission
        self._unloading: set[int] = set()
        admission.on_idle = self._on_idle

    def refusal(self, lora_id: int) -> UnknownLoraError | None:
        """Why a new request for `lora_id` cannot run (None: it can)."""
        if lora_id == 0:
            return None
        loras = self._runner.loras
        if loras is None or lora_id not in loras.adapters or lora_id in self._unloading:
            return UnknownLoraError(
                f"the request's LoRA adapter (id {lora_id}) was unloaded", param="lora_path"
            )
        return None

    def load(self, lora_id: int, name: str, path: str) -> None:
        self._runner.load_lora(lora_id, name, path)

    def unload(self, lora_id: int) -> bool:
        """Unloads now (True), or when its requests in flight have ended (False)."""
        if self._admission.num_requests(lora_id):
            self._unloading.add(lora_id)
            return False
        self._runner.unload_lora(lora_id)
        return True

    def check_invariants(self) -> None:
        loras = self._runner.loras
        for lora_id in self._unloading:
            if loras is None or lora_id not in loras.adapters or not self._admission.num_requests(lora_id):
                raise AssertionError(f"adapter {lora_id} waits to unload with no request using it")
        if loras is not None:
            loras.check_invariants()

    def _on_idle(self, lora_id: int) -> None:
        if lora_id in self._unloading:
            self._unloading.discard(lora_id)
            self._runner.unload_lora(lora_id)
