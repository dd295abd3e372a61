"""`ServerSettings`: the HTTP layer's own knobs (the engine's live in `EngineConfig`)."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglr.confined_paths import allowed_roots
from sglr.engine.images.fetch import IPNetwork, UrlPolicy
from sglr.errors import EngineConfigError
from sglr.limits import (
    MAX_BODY_BYTES,
    MAX_MESSAGES,
    MAX_SEQUENCES_PER_REQUEST,
    MAX_TOOL_SCHEMA_BYTES,
    MAX_TOOLS,
)
from sglr.server.reasoning.formats import ReasoningFormat, reasoning_format


@dataclass(frozen=True)
class ServerSettings:
    """api_key: when set, every route but the public ones (`sglr.http.auth.PUBLIC_PATHS`) needs
        `Authorization: Bearer <key>`.
    enable_metrics: serve Prometheus metrics at `/metrics` (404 otherwise).
    incremental_streaming_output: native `/generate` streams send deltas instead of SGLang's
        default cumulative `text` / `output_ids` / output logprobs.
    max_body_bytes: larger request bodies are refused with 413.
    max_sequences_per_request: a request whose batch size times `n` is larger gets a 400.
    max_messages / max_tools / max_tool_schema_bytes: chat requests with more messages, more
        tools or a larger tool schema get a 400 (every limit: `sglr.limits`).
    health_timeout_s: how long `/health_generate` waits for its one-token generation.
    allow_image_urls: images may come as http(s) URLs (else only inline, as data URLs or
        base64, or as paths below), in `/generate` `image_data` and chat `image_url` parts.
    allowed_image_url_networks: with `allow_image_urls`, the non-public networks (CIDR) image
        URLs may reach too (by default public addresses only; `sglr.engine.images.fetch`).
    allowed_local_media_paths: directories images may be read from by path or `file://` URL
        (none: paths are refused); see `sglr.confined_paths` for what a path may be.
    allowed_lora_paths: directories `/load_lora_adapter` may read adapters from (each adapter a
        directory inside one; none: runtime loads are refused). Adapters the engine loads at
        start (`lora_paths`) are the operator's and need no root.
    reasoning_parser: the reasoning format of chat replies (`sglr.server.reasoning.formats`):
        their reasoning goes in `reasoning_content`; None: it stays in the content.
    responses_store_path: the SQLite file stored `/v1/responses` responses are kept in (None:
        in memory, gone with the server).
    max_stored_responses: stored responses kept; the oldest are evicted past it.
    batch_storage_dir: where the Files and Batch APIs keep files and batch state (None:
        `<sglr cache>/batches/<served name>`); a server started on it resumes its batches.
    batch_max_concurrency: batch lines running at once, across all batches (2: on a 2-core CPU
        more lines cost live requests' TTFT and finish the batch no sooner; raise it on a GPU).
    batch_max_file_bytes / batch_max_storage_bytes: one uploaded file (413), all stored files (400).
    launch_args: the resolved command-line options, echoed by `/server_info` (the key masked).
    """

    api_key: str | None = None
    enable_metrics: bool = False
    incremental_streaming_output: bool = False
    max_body_bytes: int = MAX_BODY_BYTES
    max_sequences_per_request: int = MAX_SEQUENCES_PER_REQUEST
    max_messages: int = MAX_MESSAGES
    max_tools: int = MAX_TOOLS
    max_tool_schema_bytes: int = MAX_TOOL_SCHEMA_BYTES
    health_timeout_s: float = 20.0
    allow_image_urls: bool = False
    allowed_image_url_networks: tuple[str, ...] = ()
    allowed_local_media_paths: tuple[str, ...] = ()
    allowed_lora_paths: tuple[str, ...] = ()
    reasoning_parser: str | None = None
    responses_store_path: str | None = None
    max_stored_responses: int = 1000
    batch_storage_dir: str | None = None
    batch_max_concurrency: int = 2
    batch_max_file_bytes: int = MAX_BODY_BYTES
    batch_max_storage_bytes: int = 1 << 30
    launch_args: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allowed_local_media_paths", tuple(map(str, self.allowed_local_media_paths)))
        allowed_roots(self.allowed_local_media_paths)  # existing directories, or a config error
        object.__setattr__(self, "allowed_lora_paths", tuple(map(str, self.allowed_lora_paths)))
        allowed_roots(self.allowed_lora_paths)
        object.__setattr__(
            self, "allowed_image_url_networks", tuple(map(str, self.allowed_image_url_networks))
        )
        if self.allowed_image_url_networks and not self.allow_image_urls:
            raise EngineConfigError("allowed_image_url_networks needs allow_image_urls")
        _networks(self.allowed_image_url_networks)  # CIDRs, or a config error
        reasoning_format(self.reasoning_parser)  # a known name, or a config error
        if self.api_key is not None and not self.api_key:
            raise EngineConfigError("api_key must not be empty (leave it unset to disable auth)")
        if self.max_body_bytes < 1024:
            raise EngineConfigError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        for name in ("max_sequences_per_request", "max_messages", "max_tools", "max_tool_schema_bytes",
                     "batch_max_concurrency", "batch_max_file_bytes", "batch_max_storage_bytes"):  # fmt: skip
            if getattr(self, name) < 1:
                raise EngineConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        _check_responses_store(self.responses_store_path, self.max_stored_responses)
        if self.health_timeout_s <= 0:
            raise EngineConfigError(f"health_timeout_s must be positive, got {self.health_timeout_s}")

    @functools.cached_property
    def reasoning_format(self) -> ReasoningFormat | None:
        return reasoning_format(self.reasoning_parser)

    @functools.cached_property
    def image_url_policy(self) -> UrlPolicy | None:
        """What image URLs may reach; None when they are refused."""
        if not self.allow_image_urls:
            return None
        return UrlPolicy(allowed_networks=_networks(self.allowed_image_url_networks))


def _check_responses_store(path: str | None, max_responses: int) -> None:
    """Before the model loads: the store opens with the app, after it."""
    if max_responses < 1:
        raise EngineConfigError(f"max_stored_responses must be at least 1, got {max_responses}")
    if path is not None and not Path(path).parent.is_dir():
        raise EngineConfigError(f"responses_store_path {path!r}: its directory does not exist")


def _networks(cidrs: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    try:
        return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)
    except ValueError as exc:
        raise EngineConfigError(f"allowed_image_url_networks: {exc}") from None
