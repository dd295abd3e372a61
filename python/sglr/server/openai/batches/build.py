"""A server's `BatchService`, from its settings: where the store lives, and its bounds."""

from __future__ import annotations

from pathlib import Path

from sglr.server.openai.batches.execute import LineExecutor
from sglr.server.openai.batches.service import BatchBounds, BatchService, default_storage_dir
from sglr.server.state import ServerState


def build_batch_service(state: ServerState) -> BatchService:
    settings = state.settings
    root = (
        Path(settings.batch_storage_dir).expanduser()
        if settings.batch_storage_dir is not None
        else default_storage_dir(state.engine.served_model_name)
    )
    bounds = BatchBounds(
        max_concurrency=settings.batch_max_concurrency,
        max_file_bytes=settings.batch_max_file_bytes,
        max_storage_bytes=settings.batch_max_storage_bytes,
    )
    return BatchService(root, LineExecutor(state), bounds)
