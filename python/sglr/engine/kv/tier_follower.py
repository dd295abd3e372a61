"""`TierFollower`: a tensor-parallel rank other than 0 storing and loading its own KV pages.

Rank 0's `KVTiers` decides every page move and sends it (`tier_ops.py`); this rank executes it
on its own shard (its KV heads) with its own page store (its own subdirectory) and worker
thread, so its device pool ends up holding the same slots as rank 0's. It never decides
anything: a page this rank cannot read makes every rank load fewer pages (`FinishReads`).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from sglr.engine.kv.hicache_config import HiCacheConfig
from sglr.engine.kv.page_file import PageData
from sglr.engine.kv.page_keys import NamespaceSeeds
from sglr.engine.kv.page_store import PageStore
from sglr.engine.kv.tier_ops import CheckTier, FinishReads, ScatterPages, StartRead, TierOp, WritePages
from sglr.engine.kv.tier_worker import ReadPages, TierWorker, WritePage
from sglr.errors import InvariantError

logger = logging.getLogger("sglr.engine")


class TierFollower:
    def __init__(self, config: HiCacheConfig, kv_cache: Any, fingerprint: bytes, tp: Any) -> None:
        self._tp = tp
        self._k_buffer = kv_cache.k_buffer
        self._v_buffer = kv_cache.v_buffer
        num_layers, _, num_kv_heads, head_dim = self._k_buffer.shape
        self.page_size = config.page_size
        page_shape = (num_layers, config.page_size, num_kv_heads, head_dim)
        self.store = PageStore(config.directory, config.capacity_bytes, self._k_buffer.dtype, page_shape)
        self._worker = TierWorker(self.store)
        self._seeds = NamespaceSeeds(fingerprint)
        # Reads rank 0 took, by job id: (first token, K, V), until scattered or the next take.
        self._taken: dict[int, tuple[int, torch.Tensor, torch.Tensor]] = {}
        self._first_tokens: dict[int, int] = {}  # reads in flight: the first token each covers

    def run(self, op: TierOp) -> None:
        """One of rank 0's orders (the runner's recipe hook)."""
        match op:
            case WritePages(pages):
                for page in pages:
                    index = torch.as_tensor(page.slots, dtype=torch.int64, device=self._k_buffer.device)
                    data = PageData(self._k_buffer[:, index].cpu(), self._v_buffer[:, index].cpu())
                    self._worker.queued_keys.add(page.key)
                    seed = self._seeds.of(page.namespace)
                    self._worker.submit(WritePage(page.key, seed, page.token_ids, data))
            case StartRead(job_id, first_token, namespace, keys, token_pages):
                self._first_tokens[job_id] = first_token
                self._worker.submit(ReadPages(job_id, self._seeds.of(namespace), keys, token_pages))
            case FinishReads(job_ids):
                self._taken.clear()
                for job_id in job_ids:
                    self._finish(job_id)
            case ScatterPages(job_id, from_token, slots):
                first_token, k, v = self._taken.pop(job_id)
                offset = from_token - first_token
                index = torch.as_tensor(slots, dtype=torch.int64, device=self._k_buffer.device)
                self._k_buffer.index_copy_(
                    1, index, k[:, offset : offset + slots.size].to(self._k_buffer.device)
                )
                self._v_buffer.index_copy_(
                    1, index, v[:, offset : offset + slots.size].to(self._v_buffer.device)
                )
            case CheckTier():
                is_ok = 1
                try:
                    self.check_invariants()
                except InvariantError:
                    logger.exception("KV tier: rank %d's invariants failed", self._tp.rank)
                    is_ok = 0
                self._tp.min_over_ranks(is_ok)

    def close(self) -> None:
        """Finishes the writes queued so far (rank 0 sent its last ones before stopping us)."""
        self._worker.stop()
        self.store.close()

    def check_invariants(self) -> None:
        self.store.check_invariants()
        if self._taken.keys() & self._first_tokens.keys():
            raise InvariantError("KV tier follower: a read both in flight and taken")

    def _finish(self, job_id: int) -> None:
        done = self._worker.poll(None)  # one worker thread: reads finish in rank 0's order
        if done is None or done.job_id != job_id:
            raise InvariantError(f"KV tier follower: read {job_id} expected, got {done}")
        first_token = self._first_tokens.pop(job_id)
        num_pages = self._tp.min_over_ranks(len(done.pages))
        if num_pages:
            k = torch.cat([page.k for page in done.pages[:num_pages]], dim=1)
            v = torch.cat([page.v for page in done.pages[:num_pages]], dim=1)
            self._taken[job_id] = (first_token, k, v)
