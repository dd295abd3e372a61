"""`LoraRegistry`: the front's names of the LoRA adapters being served, and their ids.

Ids are stable and never reused: adapter k of `--lora-paths` is id k (1-based; 0 is the base
model), on the front and on every worker alike, and an adapter loaded again under a name gets a
new id, so nothing cached for the old weights (KV in the prefix cache keyed by id) serves the
new. A name that is not loaded is an `UnknownLoraError` naming it, never the base model.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sglr.errors import (
    EngineConfigError,
    LoraAdapterError,
    LoraCapacityError,
    LoraNotFoundError,
    UnknownLoraError,
)

BASE_LORA_ID = 0


@dataclass(frozen=True)
class LoraRef:
    lora_id: int
    name: str
    path: str


def parse_lora_paths(lora_paths: Iterable[str] | Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """SGLang's `--lora-paths`: `name=path` items, or bare paths (named after themselves), or a
    mapping of name to path; (name, path) pairs in order."""
    if lora_paths is None:
        return ()
    if isinstance(lora_paths, str):
        lora_paths = [lora_paths]
    pairs: list[tuple[str, str]] = []
    items = lora_paths.items() if isinstance(lora_paths, Mapping) else (_split(item) for item in lora_paths)
    for name, path in items:
        if not name or not path:
            raise EngineConfigError(f"lora_paths: {name!r}={path!r} needs a name and a path")
        if any(name == seen for seen, _ in pairs):
            raise EngineConfigError(f"lora_paths: adapter name {name!r} given twice")
        pairs.append((str(name), str(path)))
    return tuple(pairs)


def _split(item: str) -> tuple[str, str]:
    if not isinstance(item, str):
        raise EngineConfigError(f"lora_paths items are 'name=path' strings, got {item!r}")
    name, sep, path = item.partition("=")
    return (name, path) if sep else (item, item)


def startup_adapters(lora_paths: tuple[tuple[str, str], ...]) -> tuple[tuple[int, str, str], ...]:
    """(id, name, path) of the adapters loaded at start: ids 1.. in order."""
    return tuple((i, name, path) for i, (name, path) in enumerate(lora_paths, start=1))


class LoraRegistry:
    """Thread-safe: requests resolve names while an admin call loads or unloads."""

    def __init__(
        self, adapters: Iterable[tuple[int, str, str]], enabled: bool, max_loaded: int | None = None
    ) -> None:
        self.enabled = enabled
        self.max_loaded = max_loaded
        self._lock = threading.Lock()
        self._by_name: dict[str, LoraRef] = {}
        self._loading: set[str] = set()
        for lora_id, name, path in adapters:
            self._by_name[name] = LoraRef(lora_id, name, path)
        self._ids = itertools.count(max((ref.lora_id for ref in self._by_name.values()), default=0) + 1)

    def reserve(self, name: str, path: str) -> LoraRef:
        """A new id for `name` (not resolvable until `commit`); refuses a name in use and a load
        past `max_loaded`."""
        if not self.enabled:
            raise LoraAdapterError(
                "this engine serves no LoRA adapters (start it with enable_lora; sglr-server: --enable-lora)"
            )
        if not name or not isinstance(name, str):
            raise LoraAdapterError(f"a LoRA adapter needs a name, got {name!r}")
        with self._lock:
            if name in self._by_name or name in self._loading:
                raise LoraAdapterError(f"LoRA adapter {name!r} is already loaded (unload it first)")
            if self.max_loaded is not None and len(self._by_name) + len(self._loading) >= self.max_loaded:
                raise LoraCapacityError(
                    f"{self.max_loaded} LoRA adapters are loaded (max_loaded_loras): unload one first"
                )
            self._loading.add(name)
            return LoraRef(next(self._ids), name, path)

    def commit(self, ref: LoraRef) -> None:
        with self._lock:
            self._loading.discard(ref.name)
            self._by_name[ref.name] = ref

    def cancel(self, ref: LoraRef) -> None:
        with self._lock:
            self._loading.discard(ref.name)

    def remove(self, name: str) -> LoraRef:
        """Forgets `name` (new requests for it are refused from now on)."""
        with self._lock:
            ref = self._by_name.pop(name, None)
        if ref is None:
            raise LoraNotFoundError(f"LoRA adapter {name!r} is not loaded", param="lora_name")
        return ref

    def resolve(self, name: str | None) -> int:
        """The id requests for `name` run with (0 for None: the base model)."""
        if name is None:
            return BASE_LORA_ID
        with self._lock:
            ref = self._by_name.get(name)
        if ref is None:
            if not self.enabled:
                raise UnknownLoraError(
                    f"LoRA adapter {name!r}: this engine serves no adapters (start it with lora_paths or "
                    "enable_lora; sglr-server: --lora-paths, --enable-lora)",
                    param="lora_path",
                )
            loaded = ", ".join(sorted(self._by_name)) or "none"
            raise UnknownLoraError(
                f"LoRA adapter {name!r} is not loaded (loaded: {loaded})", param="lora_path"
            )
        return ref.lora_id

    def adapters(self) -> list[LoraRef]:
        with self._lock:
            return sorted(self._by_name.values(), key=lambda ref: ref.lora_id)
