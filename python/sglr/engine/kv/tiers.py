"""`KVTiers`: the second KV tier under the device pool (HiCache's idea; pages on local disk).

`KVPool` owns it and calls it at three points, all on the scheduler thread:
- after an insert into the prefix index (`on_insert`): write_through copies the new whole pages
  out of the device pool and queues their writes; write_back only notes where they are, and
  `on_evict` (before the pool frees evicted slots) writes the noted pages those slots hold;
  write_through_selective writes a page at its insert once two prompts have held it (counted
  in `prefetch`);
- when a request arrives (`prefetch`): the whole pages past its device-cached prefix that the
  store holds, consecutively, are read by the worker thread;
- before each admission pass (`take_loads`): finished reads come back (the prefetch policy says
  how long to wait for unfinished ones) and the pool puts them into fresh device slots
  (`scatter`) and the prefix index, where the scheduler's match then finds them.
Only whole pages are stored; a page's key names its whole prefix (`page_keys.py`), so a load
always extends the device-cached prefix, never replaces any of it.

Under tensor parallelism (`tp`) this is rank 0's tier: each page move it makes on its own shard
is also sent to the other ranks (`tier_ops.py`), which make it on theirs (`tier_follower.py`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from sglr.engine.kv.hicache_config import SELECTIVE_WRITE_THRESHOLD, HiCacheConfig
from sglr.engine.kv.page_file import PageData
from sglr.engine.kv.page_keys import NamespaceSeeds, page_keys
from sglr.engine.kv.page_store import PageStore
from sglr.engine.kv.tier_ops import (
    KV_TIER_RECIPE,
    CheckTier,
    FinishReads,
    PageWrite,
    ScatterPages,
    StartRead,
    TierOp,
    WritePages,
)
from sglr.engine.kv.tier_worker import PagesRead, ReadPages, TierWorker, WritePage
from sglr.errors import InvariantError

# The timeout policy waits this long per step, plus a little per page in flight.
_TIMEOUT_BASE_S = 0.02
_TIMEOUT_PER_PAGE_S = 0.002
_MAX_COUNTED_PAGES = 1 << 18


@dataclass(frozen=True)
class Load:
    """Pages read for a prefix: KV of `token_ids[first_token:]` (`[L, T, H, D]` each), by read
    `job_id`."""

    job_id: int
    token_ids: np.ndarray
    namespace: str | None
    first_token: int
    k: torch.Tensor
    v: torch.Tensor


@dataclass(frozen=True)
class _NotedPage:
    key: str
    seed: bytes
    namespace: str | None
    token_ids: np.ndarray
    slots: np.ndarray


class KVTiers:
    def __init__(self, config: HiCacheConfig, kv_cache: Any, fingerprint: bytes, tp: Any = None) -> None:
        """`tp`: rank 0's `TensorParallel` when other ranks follow (size > 1), else None."""
        self.config = config
        self.page_size = config.page_size
        self._k_buffer = kv_cache.k_buffer
        self._v_buffer = kv_cache.v_buffer
        num_layers, num_rows, num_kv_heads, head_dim = self._k_buffer.shape
        self.store = PageStore(
            config.directory,
            config.capacity_bytes,
            self._k_buffer.dtype,
            (num_layers, self.page_size, num_kv_heads, head_dim),
        )
        self._worker = TierWorker(self.store)
        self._seeds = NamespaceSeeds(fingerprint)
        self._tp = tp if tp is not None and tp.size > 1 else None
        self._follower_writes: list[PageWrite] = []  # sent once per call (`_send_writes`)
        # write_back: pages noted at insert, by id; which noted page each device slot holds.
        self._noted: dict[int, _NotedPage] = {}
        self._noted_keys: set[str] = set()
        self._page_of_slot = np.full(num_rows, -1, dtype=np.int64)
        self._next_id = 0
        self._uses: OrderedDict[str, int] = OrderedDict()  # write_through_selective: prompts per page
        self._jobs: dict[int, tuple[np.ndarray, str | None, int]] = {}
        self._num_pages_in_flight = 0
        self.num_loaded_tokens = 0
        self.num_loaded_bytes = 0
        self.load_seconds = 0.0
        self.wait_seconds = 0.0

    # ----- writes -----

    def on_insert(self, token_ids: np.ndarray, slots: np.ndarray, namespace: str | None) -> None:
        """The index now holds `slots` as the KV of `token_ids[: slots.size]`."""
        policy = self.config.write_policy
        seed = self._seed(namespace)
        for start, key in self._pages(seed, token_ids[: slots.size]):
            if key in self._noted_keys or self._is_stored(key):
                continue
            if policy == "write_through_selective" and self._uses.get(key, 0) < SELECTIVE_WRITE_THRESHOLD:
                continue
            page_tokens = token_ids[start : start + self.page_size]
            page_slots = slots[start : start + self.page_size]
            if policy != "write_back":
                self._write(key, seed, namespace, page_tokens, page_slots)
            else:
                page_id = self._next_id
                self._next_id += 1
                noted = _NotedPage(key, seed, namespace, np.array(page_tokens), np.array(page_slots))
                self._noted[page_id] = noted
                self._noted_keys.add(key)
                self._page_of_slot[page_slots] = page_id
        self._send_writes()

    def on_evict(self, slots: np.ndarray) -> None:
        """`slots` leave the index and are freed next: write_back writes the pages they hold."""
        if not self._noted or slots.size == 0:
            return
        ids = np.unique(self._page_of_slot[slots])
        for page_id in ids[ids >= 0].tolist():
            self._flush_noted(page_id)
        self._send_writes()  # before the pool reuses the slots

    def flush(self) -> None:
        """Writes every noted page (write_back at close: the device pool does not outlive us)."""
        for page_id in list(self._noted):
            self._flush_noted(page_id)
        self._send_writes()

    # ----- loads -----

    def prefetch(self, token_ids: np.ndarray, namespace: str | None, device_slots: np.ndarray) -> None:
        """Reads the stored whole pages that extend the device-cached prefix `device_slots`."""
        tokens = np.asarray(token_ids)[: max(token_ids.size - 1, 0)]  # the last token is computed
        seed = self._seed(namespace)
        pages = self._pages(seed, tokens)
        if self.config.write_policy == "write_through_selective":
            self._count_uses(pages)
        first = device_slots.size // self.page_size
        keys = []
        for _, key in pages[first:]:
            if not self.store.contains(key):
                break
            keys.append(key)
        if not keys:
            return
        first_token = first * self.page_size
        end = first_token + len(keys) * self.page_size
        token_pages = tuple(tokens[s : s + self.page_size] for s in range(first_token, end, self.page_size))
        job_id = self._next_id
        self._next_id += 1
        self._jobs[job_id] = (np.array(tokens[:end]), namespace, first_token)
        self._num_pages_in_flight += len(keys)
        self._worker.submit(ReadPages(job_id, seed, tuple(keys), token_pages))
        self._send(StartRead(job_id, first_token, namespace, tuple(keys), token_pages))

    def take_loads(self) -> list[Load]:
        """Finished reads, waiting for unfinished ones as the prefetch policy says."""
        policy = self.config.prefetch_policy
        if self.config.directory is None:
            policy = "wait_complete"  # the host-tier role: a load is always worth its wait
        started = time.perf_counter()
        deadline = started + _TIMEOUT_BASE_S + _TIMEOUT_PER_PAGE_S * self._num_pages_in_flight
        taken = []
        while len(taken) < len(self._jobs):
            if policy == "wait_complete":
                timeout = None
            elif policy == "timeout":
                timeout = max(0.0, deadline - time.perf_counter()) or 0
            else:
                timeout = 0
            done = self._worker.poll(timeout)
            if done is None:
                break
            taken.append(done)
        if self._tp is not None and taken:
            # Each rank loads what every rank read: the fewest pages (a rank's bad page).
            self._send(FinishReads(tuple(done.job_id for done in taken)))
            taken = [
                replace(done, pages=done.pages[: self._tp.min_over_ranks(len(done.pages))]) for done in taken
            ]
        loads = [load for load in map(self._finish, taken) if load is not None]
        self.wait_seconds += time.perf_counter() - started
        return loads

    def scatter(self, load: Load, from_token: int, slots: np.ndarray) -> None:
        """Writes the KV of `load.token_ids[from_token : from_token + slots.size]` into `slots`."""
        started = time.perf_counter()
        offset = from_token - load.first_token
        index = torch.as_tensor(slots, dtype=torch.int64, device=self._k_buffer.device)
        k = load.k[:, offset : offset + slots.size].to(self._k_buffer.device)
        v = load.v[:, offset : offset + slots.size].to(self._v_buffer.device)
        self._k_buffer.index_copy_(1, index, k)
        self._v_buffer.index_copy_(1, index, v)
        self.num_loaded_tokens += int(slots.size)
        self.num_loaded_bytes += 2 * k.numel() * k.element_size()
        self.load_seconds += time.perf_counter() - started
        self._send(ScatterPages(load.job_id, from_token, np.array(slots)))

    # ----- the rest -----

    def reset(self) -> None:
        """The device pool was emptied: noted pages are gone (stored pages stay)."""
        self._noted.clear()
        self._noted_keys.clear()
        self._page_of_slot[:] = -1

    def close(self) -> None:
        self.flush()
        self._worker.stop()
        self.store.close()

    def stats(self) -> dict[str, float | int]:
        return {
            "hicache_loaded_tokens": self.num_loaded_tokens,
            "hicache_loaded_bytes": self.num_loaded_bytes,
            "hicache_load_seconds": self.load_seconds,
            "hicache_wait_seconds": self.wait_seconds,
            "hicache_written_pages": self._worker.num_written_pages,
            "hicache_written_bytes": self._worker.num_written_bytes,
            "hicache_stored_pages": self.store.num_pages,
            "hicache_stored_bytes": self.store.num_bytes,
            "hicache_corrupt_pages": self.store.num_corrupt_pages,
            "hicache_evicted_pages": self.store.num_evicted_pages,
        }

    def check_invariants(self) -> None:
        if self._tp is not None:  # every rank takes part before anyone may raise
            self._send(CheckTier())
            if not self._tp.min_over_ranks(1):
                raise InvariantError("KV tier: another rank's invariants failed (its log says which)")
        self.store.check_invariants()
        noted_slots = sum(page.slots.size for page in self._noted.values())
        if noted_slots != int((self._page_of_slot >= 0).sum()) or len(self._noted_keys) != len(self._noted):
            raise InvariantError("KV tier: write_back notes disagree with their slot map")
        for page_id, page in self._noted.items():
            if (self._page_of_slot[page.slots] != page_id).any():
                raise InvariantError(f"KV tier: noted page {page.key} lost its slots")

    def _finish(self, done: PagesRead) -> Load | None:
        token_ids, namespace, first_token = self._jobs.pop(done.job_id)
        self._num_pages_in_flight -= (token_ids.size - first_token) // self.page_size
        self.load_seconds += done.seconds
        if not done.pages:
            return None
        end = first_token + len(done.pages) * self.page_size
        k = torch.cat([page.k for page in done.pages], dim=1)
        v = torch.cat([page.v for page in done.pages], dim=1)
        return Load(done.job_id, token_ids[:end], namespace, first_token, k, v)

    def _write(
        self, key: str, seed: bytes, namespace: str | None, token_ids: np.ndarray, slots: np.ndarray
    ) -> None:
        if self._tp is not None:
            self._follower_writes.append(PageWrite(key, namespace, np.array(token_ids), np.array(slots)))
        index = torch.as_tensor(np.asarray(slots), dtype=torch.int64, device=self._k_buffer.device)
        page = PageData(self._k_buffer[:, index].cpu(), self._v_buffer[:, index].cpu())
        self._worker.queued_keys.add(key)
        self._worker.submit(WritePage(key, seed, np.array(token_ids), page))

    def _flush_noted(self, page_id: int) -> None:
        page = self._noted.pop(page_id)
        self._noted_keys.discard(page.key)
        self._page_of_slot[page.slots] = -1
        self._write(page.key, page.seed, page.namespace, page.token_ids, page.slots)

    def _send_writes(self) -> None:
        if self._follower_writes:
            pages, self._follower_writes = tuple(self._follower_writes), []
            self._send(WritePages(pages))

    def _send(self, op: TierOp) -> None:
        """To the other ranks, through the per-step channel (their `TierFollower.run`)."""
        if self._tp is not None:
            with self._tp.recipe_lock:  # (never inside an overlapped forward's recipe)
                self._tp.broadcast_from_first((KV_TIER_RECIPE, op))

    def _count_uses(self, pages: list[tuple[int, str]]) -> None:
        for _, key in pages:
            self._uses[key] = self._uses.pop(key, 0) + 1
        while len(self._uses) > _MAX_COUNTED_PAGES:  # the oldest counts go first
            del self._uses[next(iter(self._uses))]

    def _is_stored(self, key: str) -> bool:
        """Stored, or its write queued."""
        return key in self._worker.queued_keys or self.store.contains(key)

    def _seed(self, namespace: str | None) -> bytes:
        return self._seeds.of(namespace)

    def _pages(self, seed: bytes, token_ids: np.ndarray) -> list[tuple[int, str]]:
        keys = page_keys(seed, token_ids, self.page_size)
        return [(i * self.page_size, key) for i, key in enumerate(keys)]
