"""Convert a GGUF file once and reuse the result: a cache of converted directories keyed by the
file's identity, filled atomically.

Layout: `<cache root>/gguf/<stem>-<dtype>-<key>/`, where the key hashes the converter version,
the run dtype, the file's size and modification time and its first and last bytes (the header
with all metadata, and the end of the tensor data). A conversion writes into a temporary
sibling directory and renames it into place, so a reader sees a complete directory or none, and
an interrupted conversion leaves no half directory behind (a killed one leaves a temporary
directory that the next conversion removes).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

from sglr.envs import cache_dir as sglr_cache_dir
from sglr.model.gguf.convert import check_run_dtype

logger = logging.getLogger(__name__)

# Bump when the converted output changes, so old cache entries are not reused.
CONVERTER_VERSION = 1

_HEAD_LEN = 8 << 20
_TAIL_LEN = 1 << 20
_TMP_PREFIX = ".tmp-"


def cache_root() -> Path:
    """sglr's cache directory (see `sglr.envs.cache_dir`); conversions go to its `gguf/`."""
    return sglr_cache_dir()


def cache_key(gguf_path: Path, dtype: str) -> str:
    """A short hex digest naming the conversion of this exact file to `dtype`."""
    stat = gguf_path.stat()
    digest = hashlib.sha256(f"v{CONVERTER_VERSION}|{dtype}|{stat.st_size}|{stat.st_mtime_ns}|".encode())
    with gguf_path.open("rb") as file:
        digest.update(file.read(_HEAD_LEN))
        if stat.st_size > _HEAD_LEN:
            file.seek(max(_HEAD_LEN, stat.st_size - _TAIL_LEN))
            digest.update(file.read())
    return digest.hexdigest()[:20]


def converted_dir(gguf_path: Path, dtype: str, cache_dir: Path | None = None) -> Path:
    """Where the converted form of `gguf_path` lives (whether or not it exists yet)."""
    root = (cache_dir if cache_dir is not None else cache_root() / "gguf").expanduser()
    return root / f"{gguf_path.stem}-{dtype}-{cache_key(gguf_path, dtype)}"


def resolve_gguf(gguf_path: str | Path, *, dtype: str = "float32", cache_dir: Path | None = None) -> Path:
    """The Hugging Face-format directory for `gguf_path`, converting it on first use.

    `cache_dir` overrides `<cache root>/gguf`. Raises `ModelNotFoundError` for a missing file and
    `GGUFError` subclasses for files that cannot be converted (nothing is cached for those).
    """
    from sglr.errors import ModelNotFoundError

    check_run_dtype(dtype)
    gguf_path = Path(gguf_path).expanduser().resolve()
    if not gguf_path.is_file():
        raise ModelNotFoundError(f"GGUF file {gguf_path} does not exist or is not a file")
    target = converted_dir(gguf_path, dtype, cache_dir)
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_tmp_dirs(target.parent)

    from sglr.model.gguf.convert import convert_gguf

    start = time.perf_counter()
    logger.info("converting %s to %s (first use; later starts reuse it)", gguf_path, target)
    tmp_dir = Path(tempfile.mkdtemp(prefix=_tmp_prefix(os.getpid()), dir=target.parent))
    try:
        convert_gguf(gguf_path, tmp_dir, dtype=dtype)
        _publish(tmp_dir, target)
    finally:
        if tmp_dir.exists():
            shutil.rmtree(tmp_dir, ignore_errors=True)
    logger.info("converted %s in %.1f s", gguf_path.name, time.perf_counter() - start)
    return target


def _publish(tmp_dir: Path, target: Path) -> None:
    """Renames the finished directory into place; another process that got there first wins."""
    try:
        os.rename(tmp_dir, target)
    except OSError:
        if not (target / "config.json").is_file():
            raise
        return
    _fsync_dir(target.parent)


def _tmp_prefix(pid: int) -> str:
    # The host name keeps a cache shared between machines from judging another host's pids.
    return f"{_TMP_PREFIX}{pid}@{socket.gethostname()}@"


def _remove_abandoned_tmp_dirs(parent: Path) -> None:
    """Deletes temporary directories of this host's conversions whose process no longer runs."""
    for entry in parent.glob(f"{_TMP_PREFIX}*"):
        pid_text, _, rest = entry.name[len(_TMP_PREFIX) :].partition("@")
        host = rest.rpartition("@")[0]
        if pid_text.isdigit() and host == socket.gethostname() and not _process_alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
