"""The package's import graph: no cycles (function-local and type-checking imports included) and
no layer importing one above it (see docs/ARCHITECTURE.md, "Layering")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from graph_cycles import cycles

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "python"

# Inside sglr.router, below its HTTP program: the routing policy, with no I/O. The in-process
# data-parallel engine and sglr-server's --dp-size flags use it; it imports only its own
# modules, sglr.errors and sglr._core (the package's __init__ is part of it: importing any of
# them runs it).
ROUTING_POLICY = ("sglr.router", "sglr.router.policy", "sglr.router.keys", "sglr.router.workers")
_ABOVE_ENGINE = ("sglr.data_parallel", "sglr.http", "sglr.router", "sglr.server", "sglr.lang", "sglr.testing")
_ENGINE_AND_BELOW = ("sglr.kernels", "sglr.model", "sglr.engine", "sglr.data_parallel")

# A module of a layer may not import from these packages (`sglr.testing`, fixtures for tests and
# benchmarks, is above every layer: none imports it) ...
FORBIDDEN = {
    "sglr.kernels": ("sglr.model", "sglr.engine", *_ABOVE_ENGINE),
    "sglr.model": ("sglr.engine", *_ABOVE_ENGINE),
    "sglr.engine": _ABOVE_ENGINE,
    "sglr.engine.kv.pool": ("sglr.model",),  # the KV pool knows no model types
    "sglr.data_parallel": ("sglr.http", "sglr.router", "sglr.server", "sglr.lang", "sglr.testing"),
    # HTTP plumbing: knows no engine and neither program.
    "sglr.http": (*_ENGINE_AND_BELOW, "sglr.router", "sglr.server", "sglr.lang", "sglr.testing"),
    # sglr-router: its policy and the HTTP plumbing; no engine, nothing of sglr-server.
    "sglr.router": (*_ENGINE_AND_BELOW, "sglr.server", "sglr.lang", "sglr.testing"),
    "sglr.server": ("sglr.router", "sglr.lang", "sglr.testing"),
    "sglr.lang": ("sglr.testing",),
    # The table of request limits, read by every layer: the standard library only.
    "sglr.limits": ("sglr",),
    # The one check of a path a request names, for every layer: sglr.errors and the stdlib.
    "sglr.confined_paths": ("sglr.kernels", "sglr.model", "sglr.engine", *_ABOVE_ENGINE),
}
# ... but for these modules of them.
ALLOWED = {
    "sglr.data_parallel": ROUTING_POLICY,
    "sglr.server": ROUTING_POLICY,
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
        if target.startswith(FORBIDDEN[layer]) and target not in ALLOWED.get(layer, ())
    )
    assert wrong == []


def test_the_routing_policy_has_no_io() -> None:
    graph = import_graph()
    allowed = {*ROUTING_POLICY, "sglr.errors", "sglr._core"}
    wrong = sorted((name, target) for name in ROUTING_POLICY for target in graph[name] - allowed)
    assert wrong == []
