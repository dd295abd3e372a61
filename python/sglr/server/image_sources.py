"""Which image sources an HTTP request may name, and reading the ones it names.

By default a request carries its images inline (data URLs or bare base64): a path or a URL
would let any client make the server read its files or reach other hosts. Paths are read only
inside the directories of `--allowed-local-media-path` (`sglr.confined_paths`), http(s) URLs
only with `--allow-image-urls` and only to public addresses unless `--allowed-image-url-networks`
says otherwise (`sglr.engine.images.fetch`). A refusal is a typed error (`PathNotAllowedError`,
`UrlNotAllowedError`) naming the field, raised before anything is read where the request alone
shows it (a literal address, a scheme), else when a name resolves or a redirect points there.
The server reads what a request names itself, in a worker thread (`RequestImages.read`), and
hands the engine bytes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglr.confined_paths import confine_path, read_confined_file
from sglr.engine.images.fetch import UrlPolicy, check_url, fetch_url
from sglr.engine.images.loading import source_kind
from sglr.errors import InvalidRequestError, LimitExceededError, PathNotAllowedError, UrlNotAllowedError
from sglr.limits import MAX_IMAGE_BYTES, MAX_IMAGES_PER_REQUEST

_INLINE = ("data_url", "base64")


@dataclass(frozen=True)
class ImageSources:
    """What this server's requests may name: paths inside `local_roots` (real paths; none: no
    paths), http(s) URLs to what `url_policy` allows (None: no URLs); `max_bytes` and
    `max_images` are the engine's."""

    local_roots: tuple[Path, ...] = ()
    url_policy: UrlPolicy | None = None
    max_bytes: int = MAX_IMAGE_BYTES
    max_images: int = MAX_IMAGES_PER_REQUEST


@dataclass
class RequestImages:
    """The image sources of one request: each checked as it is met (`check`, `check_data`),
    the named ones (paths, URLs) read by `read`, then found by `resolved` / `resolved_data`."""

    sources: ImageSources
    named: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, item, where)
    _read: dict[str, bytes] = field(default_factory=dict)
    _batch: dict[str, bool] = field(default_factory=dict)

    def check(self, item: Any, where: str) -> None:
        if not isinstance(item, str):
            raise InvalidRequestError(f"{where} must be a string (a data URL or base64)", where)
        kind = source_kind(item)
        if kind in _INLINE:
            return
        if kind == "file":
            if not self.sources.local_roots:
                raise PathNotAllowedError(
                    f"{where}: file paths are refused; send the image as a data URL (start the server "
                    "with --allowed-local-media-path DIR to accept paths under DIR)",
                    where,
                )
            confine_path(item, where, self.sources.local_roots)
        elif self.sources.url_policy is None:
            raise UrlNotAllowedError(
                f"{where}: {kind} image sources are refused; send the image as a data URL "
                "(start the server with --allow-image-urls to accept http(s) URLs)",
                where,
            )
        else:
            check_url(item, where, self.sources.url_policy, resolve=False)
        if len(self.named) == self.sources.max_images:  # each costs a read or a download
            raise LimitExceededError(
                f"{where}: a request may name at most {self.sources.max_images} paths and URLs",
                where,
                "max_images_per_request",
            )
        self.named.append((kind, item, where))

    def check_data(self, image_data: Any, is_batch: bool, name: str = "image_data") -> None:
        """SGLang's native `image_data` or `video_data` (see `sglr.engine.io`): every source in it
        allowed (a video given as frames: every frame), at most `max_images` per prompt."""
        self._batch[name] = is_batch
        for entry, prefix in _entries(image_data, is_batch, name):
            if isinstance(entry, list) and len(entry) > self.sources.max_images:
                raise LimitExceededError(
                    f"{prefix} has {len(entry)} items; the limit is {self.sources.max_images}",
                    prefix,
                    "max_images_per_request",
                )
            _walk_entry(entry, prefix, self._check_leaf)

    def _check_leaf(self, item: Any, where: str) -> Any:
        self.check(item, where)
        return item

    async def read(self) -> None:
        """Reads every named source (in a worker thread: files and downloads block)."""
        if self.named:
            self._read = await asyncio.to_thread(self._read_all)

    def _read_all(self) -> dict[str, bytes]:
        out = {}
        roots, max_bytes, policy = self.sources.local_roots, self.sources.max_bytes, self.sources.url_policy
        # One deadline for all of the request's downloads, not one each.
        deadline = time.monotonic() + (policy.deadline_s if policy is not None else 0)
        for kind, item, where in self.named:
            if kind == "file":
                out[where] = read_confined_file(item, where, roots, max_bytes, "max_image_bytes")
            else:
                assert policy is not None
                out[where] = fetch_url(item, where, policy, max_bytes, deadline)
        return out

    def resolved(self, item: Any, where: str) -> Any:
        """The source at `where` as the engine is to get it: what was read, else as sent."""
        return self._read.get(where, item)

    def resolved_data(self, image_data: Any, name: str = "image_data") -> Any:
        """`image_data` (checked with `check_data`) with every named source replaced by its bytes."""
        if image_data is None or not self._read:
            return image_data
        is_batch = self._batch[name]
        entries = [
            _walk_entry(entry, prefix, self.resolved)
            for entry, prefix in _entries(image_data, is_batch, name)
        ]
        return entries if is_batch and isinstance(image_data, list) else entries[0]


def _entries(image_data: Any, is_batch: bool, name: str) -> list[tuple[Any, str]]:
    """Each prompt's entry and its field name (one entry for a single prompt)."""
    if image_data is None:
        return []
    if is_batch and isinstance(image_data, list):
        return [(entry, f"{name}[{i}]") for i, entry in enumerate(image_data)]
    return [(image_data, name)]


def _walk_entry(entry: Any, prefix: str, visit: Any) -> Any:
    """`entry` (None, a source, or a list of sources and videos' frame lists) with `visit(item,
    where)` applied to every source."""
    if entry is None:
        return None
    if not isinstance(entry, list):
        return visit(entry, prefix)
    out = []
    for j, item in enumerate(entry):
        where = f"{prefix}[{j}]"
        if isinstance(item, list):  # a video's frames
            out.append([visit(frame, f"{where}[{k}]") for k, frame in enumerate(item)])
        else:
            out.append(visit(item, where))
    return out
