"""The house's size and shape limits, read from the source as text: no module cycle inside a Rust
crate (paths through `crate::`, `super::`, `self::` and child modules, re-exports followed to the
module that defines the name), no Rust file over 800 lines and no Python module over 350.

Each limit has a list of the places that still break it; the test fails when a new place breaks
a limit and when a listed one no longer does (so the lists only shrink)."""

from __future__ import annotations

import re
from pathlib import Path

from graph_cycles import cycles

ROOT = Path(__file__).resolve().parents[1]
MAX_RUST_LINES = 800
MAX_PYTHON_LINES = 350

# Places that break a limit today; each entry goes when its code is reshaped.
KNOWN_RUST_CYCLES: list[list[str]] = []
KNOWN_LONG_FILES: set[str] = set()

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = re.compile(rf"\b(?:crate|super|self)(?:::{_IDENT})+")
_USE = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
_TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s")


def _code(path: Path) -> str:
    """The file without its comments and its `#[cfg(test)]` module (whose `super` is the file)."""
    text = re.sub(r"//[^\n]*", "", path.read_text())
    match = _TEST_MODULE.search(text)
    return text[: match.start()] if match else text


def _expand_use(tree: str) -> list[str]:
    """`a::{b, c::{d, e as f}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    out: list[str] = []

    def walk(prefix: str, text: str) -> None:
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        for part in filter(None, parts):
            if "{" in part:
                head, _, rest = part.partition("{")
                walk(prefix + head, rest[:-1])
            else:
                out.append(prefix + part)

    walk("", tree)
    return out


class Crate:
    def __init__(self, src: Path) -> None:
        self.name = next(
            line.split('"')[1]
            for line in (src.parent / "Cargo.toml").read_text().splitlines()
            if line.startswith("name")
        )
        self.files: dict[tuple[str, ...], Path] = {}
        for path in sorted(src.rglob("*.rs")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] in ("mod", "lib"):
                parts.pop()
            self.files[tuple(parts)] = path
        self.codes = {module: _code(path) for module, path in self.files.items()}
        self.reexports = {module: self._reexports(module) for module in self.files}

    def label(self, module: tuple[str, ...]) -> str:
        return f"{self.name}::{'::'.join(module) or 'lib'}"

    def _absolute(self, module: tuple[str, ...], path: str) -> tuple[str, ...] | None:
        """A path as written in `module`, made absolute (None: another crate's)."""
        segments = path.strip(":").split("::")
        if segments[0] == "crate":
            base, segments = (), segments[1:]
        elif segments[0] in ("self", "super"):
            base = module
            while segments and segments[0] in ("self", "super"):
                if segments.pop(0) == "super":
                    base = base[:-1]
        elif (*module, segments[0]) in self.files:
            base = module
        else:
            return None
        return (*base, *segments)

    def _reexports(self, module: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        names = {}
        for match in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", self.codes[module]):
            for path in _expand_use(match.group(1)):
                absolute = self._absolute(module, path)
                if absolute and absolute[-1] != "*":
                    names[absolute[-1]] = absolute
        return names

    def resolve(self, absolute: tuple[str, ...], seen: int = 0) -> tuple[str, ...]:
        """The module that defines what an absolute path names (re-exports followed)."""
        depth = len(absolute)
        while depth and absolute[:depth] not in self.files:
            depth -= 1
        module = absolute[:depth]
        if depth < len(absolute) and seen < 8:
            target = self.reexports[module].get(absolute[depth])
            if target and target[:-1] != module:
                return self.resolve(target, seen + 1)
        return module

    def graph(self) -> dict[str, set[str]]:
        edges: dict[str, set[str]] = {}
        for module, code in self.codes.items():
            targets: set[tuple[str, ...]] = set()
            paths = list(_PATH.findall(code))
            for match in _USE.finditer(code):
                paths.extend(_expand_use(match.group(1)))
            children = [m[-1] for m in self.files if len(m) == len(module) + 1 and m[: len(module)] == module]
            for child in children:
                paths.extend(re.findall(rf"(?<![:\w]){child}(?:::{_IDENT})+", code))
            for path in paths:
                absolute = self._absolute(module, path)
                if absolute is not None:
                    targets.add(self.resolve(absolute))
            # The crate root and a module's own declarations of its children are not uses.
            edges[self.label(module)] = {self.label(t) for t in targets if t and t != module and module != ()}
        return edges


def crates() -> list[Crate]:
    return [
        Crate(src) for src in [*sorted(ROOT.glob("rust/*/src")), ROOT / "benches" / "src"] if src.is_dir()
    ]


def test_use_trees_expand() -> None:
    assert _expand_use("crate::{a::B, c::{d, E as F}}") == ["crate::a::B", "crate::c::d", "crate::c::E"]
    # Names holding "as" are whole names, not aliases.
    assert _expand_use("crate::mask::{LexemeMaskCache, base as b}") == [
        "crate::mask::LexemeMaskCache",
        "crate::mask::base",
    ]


def test_the_rust_reader_sees_edges() -> None:
    fsm = next(crate for crate in crates() if crate.name == "sglr-fsm")
    assert "sglr-fsm::error" in fsm.graph()["sglr-fsm::dfa"]


def test_no_module_cycle_inside_a_rust_crate() -> None:
    found = sorted(component for crate in crates() for component in cycles(crate.graph()))
    assert found == sorted(KNOWN_RUST_CYCLES)


def test_no_file_over_the_size_limit() -> None:
    long_files = set()
    for path in ROOT.glob("rust/**/*.rs"):
        if len(path.read_text().splitlines()) > MAX_RUST_LINES:
            long_files.add(str(path.relative_to(ROOT)))
    for path in (ROOT / "python").rglob("*.py"):
        if len(path.read_text().splitlines()) > MAX_PYTHON_LINES:
            long_files.add(str(path.relative_to(ROOT)))
    assert long_files == KNOWN_LONG_FILES
