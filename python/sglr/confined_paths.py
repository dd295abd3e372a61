"""File paths a request names, confined to the directories the server allows.

`confine_path` is the one check every path a client sends goes through (image paths, LoRA
adapter directories; cache directories are to use it too): the path must be absolute (or a
`file://` URL), hold no NUL byte, no `..` component and no percent-encoded `.`, `/` or `\\`,
and its real path (symlinks followed) must lie inside one of the allowed roots. Anything else
is a `PathNotAllowedError` naming the request field. `read_confined_file` reads such a file
(a regular file only, at most `max_bytes`) and checks again on the opened file, so a symlink
swapped in after the check does not lead out either. `confine_directory` is `confine_path` for
a directory something else reads whole (a LoRA adapter): every entry in it must lie inside the
roots as well, so a symlinked file in an allowed directory does not lead out.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote

from sglr.errors import EngineConfigError, InvalidRequestError, LimitExceededError, PathNotAllowedError

_ENCODED_SEPARATOR = re.compile(r"%(2e|2f|5c|00)", re.IGNORECASE)


def allowed_roots(directories: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    """The real paths of `directories`, each an existing directory (else `EngineConfigError`)."""
    roots = []
    for directory in directories:
        real = Path(os.path.realpath(directory))
        if not real.is_dir():
            raise EngineConfigError(f"allowed directory {str(directory)!r} is not an existing directory")
        roots.append(real)
    return tuple(roots)


def confine_path(value: object, field: str, roots: Sequence[Path]) -> Path:
    """The real path `value` names, when it lies inside one of `roots` (from `allowed_roots`)."""
    if not isinstance(value, str):
        raise PathNotAllowedError(f"{field} must be a path string", param=field)
    text = value
    if text.startswith("file://"):
        host, slash, rest = text[len("file://") :].partition("/")
        if host not in ("", "localhost") or not slash:
            raise PathNotAllowedError(f"{field}: a file:// URL must name a local absolute path", param=field)
        text = unquote("/" + rest)  # a file URL's path is percent-encoded (RFC 8089)
    if "\x00" in text:
        raise PathNotAllowedError(f"{field}: the path holds a NUL byte", param=field)
    if _ENCODED_SEPARATOR.search(text):
        raise PathNotAllowedError(f"{field}: the path holds a percent-encoded '.', '/' or '\\'", param=field)
    if not text.startswith("/"):
        raise PathNotAllowedError(f"{field}: the path must be absolute (or a file:// URL)", param=field)
    if ".." in text.split("/"):
        raise PathNotAllowedError(f"{field}: the path may not hold a '..' component", param=field)
    if not roots:
        raise PathNotAllowedError(f"{field}: this server reads no local files", param=field)
    real = Path(os.path.realpath(text))
    if not _inside(real, roots):
        lexical = Path(os.path.normpath(text))
        why = "a symlink in it leads" if _inside(lexical, roots) else "it lies"
        raise PathNotAllowedError(
            f"{field}: {why} outside the directories this server reads files from", param=field
        )
    return real


def confine_directory(value: object, field: str, roots: Sequence[Path]) -> Path:
    """The real path of the directory `value` names, confined as `confine_path` says, with each
    of its entries' real paths inside `roots` too (checked now: whoever reads the files later
    reads what an allowed directory holds, as long as nobody who may write there swaps them)."""
    real = confine_path(value, field, roots)
    if not real.is_dir():
        raise InvalidRequestError(f"{field}: not an existing directory", param=field)
    try:
        entries = sorted(os.listdir(real))
    except OSError as exc:
        raise InvalidRequestError(
            f"{field}: cannot read the directory: {exc.strerror}", param=field
        ) from None
    for entry in entries:
        if not _inside(Path(os.path.realpath(real / entry)), roots):
            raise PathNotAllowedError(
                f"{field}: {entry!r} in it leads outside the directories this server reads files from",
                param=field,
            )
    return real


def read_confined_file(value: object, field: str, roots: Sequence[Path], max_bytes: int, limit: str) -> bytes:
    """The bytes of the regular file `value` names, confined as `confine_path` says; larger than
    `max_bytes` is a `LimitExceededError` for the limit named `limit`."""
    path = confine_path(value, field, roots)
    try:
        # No following a last-moment symlink, no blocking on a FIFO.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InvalidRequestError(f"{field}: cannot read the file: {exc.strerror}", param=field) from None
    try:
        opened = _opened_path(fd)
        if opened is not None and not _inside(opened, roots):  # a directory swapped meanwhile
            raise PathNotAllowedError(
                f"{field}: it lies outside the directories this server reads files from", param=field
            )
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathNotAllowedError(f"{field}: not a regular file", param=field)
        if info.st_size > max_bytes:
            raise LimitExceededError(
                f"{field} is {info.st_size} bytes; the limit is {max_bytes} bytes", param=field, limit=limit
            )
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidRequestError(f"{field}: cannot read the file: {exc.strerror}", param=field) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew since fstat
        raise LimitExceededError(f"{field} is over the limit of {max_bytes} bytes", param=field, limit=limit)
    return data


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _opened_path(fd: int) -> Path | None:
    """Where the kernel says the open file is (Linux); None where it cannot say."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None
