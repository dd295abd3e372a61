"""`ServerState`: everything one app instance serves from (no module-level state anywhere)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sglr.server.inflight import InflightRequests
from sglr.server.settings import ServerSettings

if TYPE_CHECKING:
    from sglr.engine.engine import Engine
    from sglr.server.metrics import ServerMetrics


@dataclass
class ServerState:
    engine: Engine
    settings: ServerSettings
    metrics: ServerMetrics | None
    inflight: InflightRequests = field(default_factory=InflightRequests)
    started_at: float = field(default_factory=time.time)
    shutting_down: bool = False

    def abort_all(self) -> int:
        """Aborts every request of this server still running; returns how many."""
        rids = self.inflight.snapshot()
        for rid in rids:
            self.engine.abort(rid)
        return len(rids)

    @property
    def model_names(self) -> set[str]:
        """Names a request's `model` may use: the served name, the model path, or "default"."""
        return {self.engine.served_model_name, self.engine.model_path, "default"}
