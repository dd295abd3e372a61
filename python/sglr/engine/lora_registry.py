"""`LoraRegistry`: the front's names of the LoRA adapters being served, and their ids.

Ids are stable and never reused: adapter k of `--lora-paths` is id k (1-based; 0 is the base
model), on the front and on every worker alike, and an adapter loaded again under a name gets a
new id, so nothing cached for the old weights (KV in the prefix cache keyed by id) serves the
new. A name that is not loaded is an `UnknownLoraError` naming it, never the base model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sglr.errors import EngineConfigError, UnknownLoraError

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
    def __init__(self, adapters: Iterable[tuple[int, str, str]], enabled: bool) -> None:
        self.enabled = enabled
        self._by_name: dict[str, LoraRef] = {}
        for lora_id, name, path in adapters:
            self._by_name[name] = LoraRef(lora_id, name, path)

    def resolve(self, name: str | None) -> int:
        """The id requests for `name` run with (0 for None: the base model)."""
        if name is None:
            return BASE_LORA_ID
        ref = self._by_name.get(name)
        if ref is None:
            if not self.enabled:
                raise UnknownLoraError(
                    f"LoRA adapter {name!r}: this engine serves no adapters (start it with lora_paths)",
                    param="lora_path",
                )
            loaded = ", ".join(sorted(self._by_name)) or "none"
            raise UnknownLoraError(
                f"LoRA adapter {name!r} is not loaded (loaded: {loaded})", param="lora_path"
            )
        return ref.lora_id

    def adapters(self) -> list[LoraRef]:
        return sorted(self._by_name.values(), key=lambda ref: ref.lora_id)
