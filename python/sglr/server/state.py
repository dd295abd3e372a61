"""`ServerState`: everything one app instance serves from (no module-level state anywhere), and
the request ids of the generations in flight through it (`InflightRequests`).

`/abort_request` with `abort_all` aborts those; a new request that reuses an id still in flight
is refused (an id must name one request, or aborting by id would hit the wrong one).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sglr.confined_paths import allowed_roots
from sglr.http.errors import ApiError
from sglr.limits import MAX_IMAGE_BYTES, MAX_IMAGES_PER_REQUEST
from sglr.server.dashboard.history import DashboardHistory
from sglr.server.image_sources import ImageSources
from sglr.server.openai.responses.store import ResponseStore, StoredResponsesGauge
from sglr.server.settings import ServerSettings

if TYPE_CHECKING:
    from sglr.engine.engine import Engine
    from sglr.engine.lora_registry import LoraRef
    from sglr.server.metrics import ServerMetrics
    from sglr.server.openai.batches.service import BatchService


class InflightRequests:
    """Used from the event loop thread only (no locking)."""

    def __init__(self) -> None:
        self._rids: set[str] = set()

    def add(self, rids: list[str]) -> None:
        """Registers all of `rids` or none; 400 when one is already in flight."""
        busy = sorted(r for r in rids if r in self._rids)
        if busy:
            raise ApiError.bad_request(
                f"request id {busy[0]!r} is already in use by a running request", "rid"
            )
        self._rids.update(rids)

    def discard(self, rids: Iterable[str]) -> None:
        self._rids.difference_update(rids)

    def __contains__(self, rid: str) -> bool:
        return rid in self._rids

    def __len__(self) -> int:
        return len(self._rids)

    def snapshot(self) -> list[str]:
        return sorted(self._rids)


@dataclass
class ServerState:
    engine: Engine
    settings: ServerSettings
    metrics: ServerMetrics | None
    inflight: InflightRequests = field(default_factory=InflightRequests)
    started_at: float = field(default_factory=time.time)
    shutting_down: bool = False
    batches: BatchService | None = None  # the Files and Batch APIs (build_app sets it)
    dashboard: DashboardHistory = field(default_factory=DashboardHistory)  # sampled when polled
    image_sources: ImageSources = field(init=False)
    # The real paths runtime LoRA loads may read adapters below (none: such loads are refused).
    lora_roots: tuple[Path, ...] = field(init=False)
    # Stored `/v1/responses` responses (`store: true`).
    responses: ResponseStore = field(init=False)

    def __post_init__(self) -> None:
        config = getattr(self.engine, "config", None)  # None: a test's stand-in engine
        self.image_sources = ImageSources(
            local_roots=allowed_roots(self.settings.allowed_local_media_paths),
            url_policy=self.settings.image_url_policy,
            max_bytes=config.max_image_bytes if config is not None else MAX_IMAGE_BYTES,
            max_images=config.max_images_per_request if config is not None else MAX_IMAGES_PER_REQUEST,
        )
        self.lora_roots = allowed_roots(self.settings.allowed_lora_paths)
        self.responses = ResponseStore(self.settings.responses_store_path, self.settings.max_stored_responses)
        if self.metrics is not None:
            self.metrics.registry.register(StoredResponsesGauge(self.responses, self.metrics.model_name))

    def abort_all(self) -> int:
        """Aborts every request of this server still running; returns how many."""
        rids = self.inflight.snapshot()
        for rid in rids:
            self.engine.abort(rid)
        return len(rids)

    @property
    def model_names(self) -> set[str]:
        """Names a request's `model` may use for the base model: the served name, the model
        path, or "default" (a loaded LoRA adapter's name, or `<one of these>:<adapter>`, picks
        that adapter: `sglr.server.openai.models.resolve_model`)."""
        return {self.engine.served_model_name, self.engine.model_path, "default"}

    def lora_adapters(self) -> list[LoraRef]:
        """The adapters requests may name now (none for an engine without them)."""
        adapters = getattr(self.engine, "lora_adapters", None)  # None: a test's stand-in engine
        return adapters() if adapters is not None else []
