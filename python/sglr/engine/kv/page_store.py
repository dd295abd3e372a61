"""`PageStore`: KV pages as files in one directory, with a byte bound and LRU eviction.

Each page is `pages/<key[:2]>/<key>.kvpage` (`page_file.py`). At open the store takes an
exclusive lock on `<dir>/lock` (a second server on the same directory is refused with
`HiCacheStorageError`; the lock dies with its process), removes temporary files a killed writer
left, and indexes the pages found, least recently used first by modification time. A read that
finds a bad page logs a warning, deletes it and reports a miss. The index is shared by the
scheduler thread (`contains`) and the tier worker (reads, writes), hence its lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
import threading
from collections import OrderedDict

import numpy as np
import torch

from sglr.engine.kv.page_file import TMP_MARK, PageData, decode, encode, write_atomic
from sglr.errors import CorruptPageError, HiCacheStorageError, InvariantError

logger = logging.getLogger("sglr.engine")

_SUFFIX = ".kvpage"


class PageStore:
    def __init__(
        self, directory: str | None, capacity_bytes: int, dtype: torch.dtype, page_shape: tuple[int, ...]
    ) -> None:
        """`directory` None: a private temporary directory, removed by `close`."""
        self.is_persistent = directory is not None
        self.directory = directory if directory is not None else tempfile.mkdtemp(prefix="sglr-kv-")
        self.capacity_bytes = capacity_bytes
        self.dtype = dtype
        self.page_shape = page_shape
        self.num_corrupt_pages = 0
        self.num_evicted_pages = 0
        self._sizes: OrderedDict[str, int] = OrderedDict()  # least recently used first
        self._num_bytes = 0
        self._mutex = threading.Lock()
        self._lock_file = self._take_lock()
        self._scan()

    # ----- the index -----

    @property
    def num_pages(self) -> int:
        return len(self._sizes)

    @property
    def num_bytes(self) -> int:
        return self._num_bytes

    def contains(self, key: str) -> bool:
        with self._mutex:
            return key in self._sizes

    # ----- pages -----

    def read(self, key: str, seed: bytes, token_ids: np.ndarray) -> PageData | None:
        """The page, or None (missing, or bad: then deleted with a warning)."""
        path = self._path(key)
        try:
            with open(path, "rb") as file:
                data = file.read()
            page = decode(data, key, seed, token_ids, self.dtype, self.page_shape)
        except FileNotFoundError:
            self._forget(key)
            return None
        except CorruptPageError as exc:
            logger.warning("KV tier: skipping a bad page: %s", exc)
            self.num_corrupt_pages += 1
            self._delete(key)
            return None
        with self._mutex:
            if key in self._sizes:
                self._sizes.move_to_end(key)
        _touch(path)
        return page

    def write(self, key: str, seed: bytes, token_ids: np.ndarray, page: PageData) -> int:
        """Stores the page (evicting least recently used ones to stay in bounds); the bytes
        written (0 when it was already there or can never fit)."""
        if self.contains(key):
            return 0
        data = encode(key, seed, token_ids, page)
        if len(data) > self.capacity_bytes:
            return 0
        self._make_room(len(data))
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, data)
        with self._mutex:
            self._sizes[key] = len(data)
            self._num_bytes += len(data)
        return len(data)

    def close(self) -> None:
        if self._lock_file is None:
            return
        self._lock_file.close()  # releases the lock
        self._lock_file = None
        if not self.is_persistent:
            shutil.rmtree(self.directory, ignore_errors=True)

    def check_invariants(self) -> None:
        with self._mutex:
            total = sum(self._sizes.values())
            if total != self._num_bytes or self._num_bytes > self.capacity_bytes:
                raise InvariantError(
                    f"KV page store: {self._num_bytes} bytes counted, {total} indexed, bound {self.capacity_bytes}"
                )

    # ----- internals -----

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, "pages", key[:2], key + _SUFFIX)

    def _take_lock(self):  # type: ignore[no-untyped-def]
        try:
            os.makedirs(self.directory, exist_ok=True)
            lock_file = open(os.path.join(self.directory, "lock"), "a+")  # noqa: SIM115 (held open)
        except OSError as exc:
            raise HiCacheStorageError(f"cannot use {self.directory} for KV pages: {exc}") from None
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock_file.close()
            raise HiCacheStorageError(
                f"another server holds the KV page directory {self.directory} (its lock file); "
                "give each server its own --hicache-storage-dir"
            ) from None
        return lock_file

    def _scan(self) -> None:
        found = []
        for root, _, names in os.walk(os.path.join(self.directory, "pages")):
            for name in names:
                path = os.path.join(root, name)
                if TMP_MARK in name:
                    os.unlink(path)  # a writer died before its rename: the page never existed
                elif name.endswith(_SUFFIX):
                    stat = os.stat(path)
                    found.append((stat.st_mtime_ns, name[: -len(_SUFFIX)], stat.st_size))
        for _, key, size in sorted(found):
            self._sizes[key] = size
            self._num_bytes += size
        self._make_room(0)

    def _make_room(self, num_bytes: int) -> None:
        while True:
            with self._mutex:
                if not self._sizes or self._num_bytes + num_bytes <= self.capacity_bytes:
                    return
                key = next(iter(self._sizes))
            self._delete(key)
            self.num_evicted_pages += 1

    def _forget(self, key: str) -> None:
        with self._mutex:
            size = self._sizes.pop(key, None)
            if size is not None:
                self._num_bytes -= size

    def _delete(self, key: str) -> None:
        self._forget(key)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(key))


def _touch(path: str) -> None:
    # The modification time orders pages for LRU after a restart.
    with contextlib.suppress(OSError):
        os.utime(path)
