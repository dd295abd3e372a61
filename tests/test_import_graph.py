"""The package's import graph: no cycles (function-local and type-checking imports included) and
no layer importing one above it (see docs/ARCHITECTURE.md, "Layering")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from graph_cycles import cycles

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "python"

# A module of a layer may not import from these packages.
FORBIDDEN = {
    "sglr.kernels": ("sglr.model", "sglr.engine", "sglr.server", "sglr.lang"),
    "sglr.model": ("sglr.engine", "sglr.server", "sglr.lang"),
    "sglr.engine": ("sglr.router", "sglr.server", "sglr.lang"),
    "sglr.engine.kv.pool": ("sglr.model",),  # the KV pool knows no model types
    "sglr.router": ("sglr.server", "sglr.lang"),
    "sglr.server": ("sglr.lang",),
}


def module_files() -> dict[str, Path]:
    modules = {}
    for path in sorted((PACKAGE_ROOT / "sglr").rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        parts = list(path.relative_to(PACKAGE_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every sglr module `name` imports, wherever in the file the import stands."""
    found = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("sglr"):
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the whole package was read
    assert cycles(graph) == []


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_layer_imports_one_above_it(layer: str) -> None:
    graph = import_graph()
    wrong = sorted(
        (name, target)
        for name, targets in graph.items()
        if name == layer or name.startswith(layer + ".")
        for target in targets
        if target.startswith(FORBIDDEN[layer])
    )
    assert wrong == []
