"""The package and its language import one another in layers: no module of `sglr.lang` (nor the
package `sglr` itself) can reach itself through imports, counting imports inside functions and
under `TYPE_CHECKING`, so no import order can find a half-initialized module."""

from __future__ import annotations

import ast
from pathlib import Path

import sglr

PACKAGE_DIR = Path(sglr.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    # Extension modules (`sglr._core`) are known by their stubs.
    paths = [*PACKAGE_DIR.rglob("*.py"), *PACKAGE_DIR.rglob("*.pyi")]
    return {module_name(path): path for path in paths}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The sglr modules `name` imports anywhere in its source (`from a import b` may import the
    module `a.b` or only the name `b` of `a`: the longest known module is taken)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            candidates = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                found.add(candidate)
    return found


def cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """An import path from `start` back to itself, or None."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        module, path = stack.pop()
        for target in sorted(graph[module]):
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return None


def test_the_language_and_the_package_have_no_import_cycle():
    modules = all_modules()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    assert "sglr.lang.program" in graph["sglr.lang.api"]  # the parser sees the imports
    layered = [name for name in sorted(graph) if name == "sglr" or name.startswith("sglr.lang")]
    cycles = [cycle for name in layered if (cycle := cycle_through(name, graph)) is not None]
    assert cycles == [], "\n".join(" -> ".join(cycle) for cycle in cycles)
