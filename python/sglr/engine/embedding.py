"""`Engine.encode`: embeddings of prompts, on an engine started with `is_embedding`.

An embedding request is a prompt-only request (`max_new_tokens` 0) flagged `embed`: the
scheduler gives it no cached prefix (cached positions have no hidden states), the runner returns
each chunk's pooling parts and the scheduler adds them up (`prompt_logprobs.add_embedding_part`);
here, on the caller's side, they become the embedding the checkpoint's pooling declares.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sglr.engine import delivery
from sglr.engine.assembler import OutputAssembler
from sglr.engine.io import NormalizedInput, normalize_generate_input
from sglr.engine.output import AsyncInbox, AsyncQueueSink, QueueSink
from sglr.errors import EngineInternalError, InvalidRequestError
from sglr.model.pooling import Pooling, finish_embedding, read_pooling

_PROMPT_ONLY = {"max_new_tokens": 0}


@dataclasses.dataclass(frozen=True)
class EmbeddingModel:
    """What the front needs to finish embeddings: the pooling and the embedding's size."""

    pooling: Pooling
    dimensions: int

    @classmethod
    def of(cls, model_dir: Any) -> EmbeddingModel:
        from sglr.model.config import load_model_config

        return cls(read_pooling(model_dir), load_model_config(model_dir).hidden_size)


class EncodeMixin:
    """`Engine`'s embedding methods (kept apart from generation; they use its internals)."""

    embedding_model: EmbeddingModel | None
    _scheduler: Any

    @property
    def is_embedding(self) -> bool:
        return self.embedding_model is not None

    def encode(
        self, prompt: str | list[str] | None = None, input_ids: list[int] | list[list[int]] | None = None,
        rid: str | list[str] | None = None,
    ) -> dict[str, Any] | list[dict[str, Any]]:  # fmt: skip
        """`{"embedding": [...], "meta_info": {...}}` per prompt (a list for a batch)."""
        batch = self._embedding_input(prompt, input_ids, rid)
        requests, assemblers = self._prepare(batch)  # type: ignore[attr-defined]
        sinks = [QueueSink() for _ in requests]
        self._submit(requests, sinks)  # type: ignore[attr-defined]
        for sink, assembler in zip(sinks, assemblers, strict=True):
            delivery.wait_result(self._scheduler, sink, assembler)
        results = [self._embedding_result(assembler) for assembler in assemblers]
        return results if batch.is_batch else results[0]

    async def async_encode(
        self, prompt: str | list[str] | None = None, input_ids: list[int] | list[list[int]] | None = None,
        rid: str | list[str] | None = None,
    ) -> dict[str, Any] | list[dict[str, Any]]:  # fmt: skip
        """`encode` for asyncio callers; cancelling the call aborts the requests."""
        batch = self._embedding_input(prompt, input_ids, rid)
        requests, assemblers = self._prepare(batch)  # type: ignore[attr-defined]
        outputs = AsyncInbox()
        self._submit(requests, [AsyncQueueSink(outputs, i) for i in range(len(requests))])  # type: ignore[attr-defined]
        await delivery.async_results(self._scheduler, outputs, assemblers)
        results = [self._embedding_result(assembler) for assembler in assemblers]
        return results if batch.is_batch else results[0]

    def check_generates(self) -> None:
        """Refuses generation on an embedding engine."""
        if self.embedding_model is not None:
            raise InvalidRequestError(
                "this engine serves embeddings (is_embedding): use encode / POST /v1/embeddings, not generation"
            )

    def _embedding_input(self, prompt: Any, input_ids: Any, rid: Any) -> NormalizedInput:
        if self.embedding_model is None:
            raise InvalidRequestError(
                "this engine generates text: embeddings need an engine started with is_embedding (--is-embedding)"
            )
        batch = normalize_generate_input(prompt, input_ids, _PROMPT_ONLY, rid)
        return NormalizedInput([dataclasses.replace(s, embed=True) for s in batch.specs], batch.is_batch)

    def _embedding_result(self, assembler: OutputAssembler) -> dict[str, Any]:
        assert self.embedding_model is not None
        result = assembler.result()
        meta = result["meta_info"]
        if assembler.embedding_parts is None:
            reason = meta.get("finish_reason") or {}
            if reason.get("type") == "abort":
                return {"embedding": None, "meta_info": meta}
            raise EngineInternalError(f"request {assembler.rid} finished without its embedding")
        total, last = assembler.embedding_parts
        embedding = finish_embedding(self.embedding_model.pooling, total, last, assembler.num_prompt_tokens)
        return {"embedding": embedding, "meta_info": meta}
