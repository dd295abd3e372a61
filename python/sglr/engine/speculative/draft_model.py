"""`DraftModelDrafter` (STANDALONE): drafts from a smaller model with the same vocabulary, run by
a second `ModelRunner` with a KV cache, slots and rows of its own (this drafter is their only
owner; the engine's `KVPool` never sees them).

Per pass, for the requests that draft: each request's draft KV is cut back to the longest prefix
its tokens still share with the request (accepted drafts stay, rejected ones go), the tokens it
has not seen run as one extend batch for all of them, and `depth - 1` decode batches continue the
greedy chain. The tree is that chain plus, at each depth, the draft model's next `top_k - 1`
choices as leaves. Drafts are greedy, so the draft distribution is one-hot and the verifier's
acceptance keeps sampled output exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from sglr.engine.kv.rows import RowAllocator
from sglr.engine.kv.slots import SLOT_DTYPE, KVSlotAllocator
from sglr.engine.speculative.drafter import DraftAsk, Drafter
from sglr.engine.speculative.tree import ROOT, DraftTree
from sglr.errors import InvariantError
from sglr.model.forward_batch import ExtendRequest
from sglr.model.runner import ModelRunner


@dataclass
class _DraftKV:
    row: int
    token_ids: list[int] = field(default_factory=list)  # tokens whose draft KV is written
    slots: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=SLOT_DTYPE))


@dataclass
class _Drafting:
    uid: int
    kv: _DraftKV
    depth: int
    top_k: int
    new_slots: np.ndarray
    token_ids: list[int]
    levels: list[list[int]] = field(default_factory=list)  # top choices per depth, best first
    num_used_slots: int = 0  # of `new_slots`


class DraftModelDrafter(Drafter):
    name = "STANDALONE"

    def __init__(self, runner: ModelRunner, top_k: int) -> None:
        self.runner = runner
        self.top_k = top_k
        self.free_slots = KVSlotAllocator(runner.num_kv_slots)
        self.free_rows = RowAllocator(runner.runner_config.max_num_reqs)
        self._kvs: dict[int, _DraftKV] = {}

    def propose(self, uid: int, token_ids: np.ndarray, max_nodes: int, max_depth: int) -> DraftTree | None:
        return self.propose_all([DraftAsk(uid, token_ids, max_nodes, max_depth)])[0]

    def propose_all(self, asks: Sequence[DraftAsk]) -> list[DraftTree | None]:
        drafting = [d for d in (self._start(ask) for ask in asks) if d is not None]
        if drafting:
            self._run(drafting)
        by_uid = {d.uid: _tree(d.levels) for d in drafting}
        return [by_uid.get(ask.uid) for ask in asks]

    def forget(self, uid: int) -> None:
        kv = self._kvs.pop(uid, None)
        if kv is not None:
            self.free_slots.free(kv.slots)
            self.free_rows.free(kv.row)

    def tracked_uids(self) -> set[int]:
        return set(self._kvs)

    def check_invariants(self) -> None:
        self.free_rows.check_invariants()
        held = 0
        for uid, kv in self._kvs.items():
            if len(kv.token_ids) != kv.slots.size:
                raise InvariantError(
                    f"draft KV of request {uid}: {kv.slots.size} slots for {len(kv.token_ids)} tokens"
                )
            held += kv.slots.size
        if held + self.free_slots.num_free != self.free_slots.num_slots:
            raise InvariantError(
                f"draft KV slots leak: {held} held + {self.free_slots.num_free} free != {self.free_slots.num_slots}"
            )

    def _start(self, ask: DraftAsk) -> _Drafting | None:
        """Syncs the request's draft KV with its tokens and reserves this pass's slots."""
        tokens = ask.token_ids.tolist()
        top_k = max(1, min(self.top_k, ask.max_nodes))
        depth = min(ask.max_depth, max(1, ask.max_nodes // top_k))
        kv = self._kvs.get(ask.uid)
        if kv is None:
            row = self.free_rows.try_alloc()
            if row is None:
                return None
            kv = self._kvs[ask.uid] = _DraftKV(row)
        keep = _common_prefix_len(kv.token_ids, tokens)
        keep = min(keep, len(tokens) - 1)  # the last token runs again: its logits draft
        self.free_slots.free(kv.slots[keep:])
        kv.slots, kv.token_ids = kv.slots[:keep], kv.token_ids[:keep]
        num_new = len(tokens) - keep + depth - 1
        if len(tokens) + depth > self.runner.max_context_len:
            return None
        new_slots = self.free_slots.try_alloc(num_new)
        if new_slots is None:
            self.forget(ask.uid)  # the draft cache is full: this request drafts again later
            return None
        return _Drafting(ask.uid, kv, depth, top_k, new_slots, tokens)

    def _run(self, drafting: list[_Drafting]) -> None:
        catch_up = []
        for d in drafting:
            keep = d.kv.slots.size
            num_catch_up = len(d.token_ids) - keep
            catch_up.append(
                ExtendRequest(d.kv.row, np.array(d.token_ids[keep:]), d.kv.slots.astype(np.int64),
                              d.new_slots[:num_catch_up].astype(np.int64))
            )  # fmt: skip
            d.kv.slots = np.concatenate((d.kv.slots, d.new_slots[:num_catch_up]))
            d.kv.token_ids = list(d.token_ids)
            d.num_used_slots = num_catch_up
        logits = self.runner.forward_extend(catch_up).next_token_logits
        going = list(range(len(drafting)))
        while True:
            tops = torch.topk(logits, max(d.top_k for d in drafting), dim=-1).indices.cpu().numpy()
            for row, i in enumerate(going):
                drafting[i].levels.append(tops[row, : drafting[i].top_k].tolist())
            going = [i for i in going if len(drafting[i].levels) < drafting[i].depth]
            if not going:
                return
            rows, inputs, seq_lens, slots = [], [], [], []
            for i in going:
                d = drafting[i]
                slot = d.new_slots[d.num_used_slots]
                d.num_used_slots += 1
                rows.append(d.kv.row)
                inputs.append(d.levels[-1][0])
                seq_lens.append(d.kv.slots.size + 1)
                slots.append(int(slot))
                d.kv.slots = np.append(d.kv.slots, np.array([slot], dtype=SLOT_DTYPE))
                d.kv.token_ids.append(d.levels[-1][0])
            logits = self.runner.forward_decode(rows, inputs, seq_lens, slots).next_token_logits


def _common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


def _tree(levels: list[list[int]]) -> DraftTree | None:
    """The greedy chain with each depth's other top choices as leaves."""
    tree = DraftTree()
    tip = ROOT
    for choices in levels:
        chain = tree.add(tip, choices[0])
        for token_id in choices[1:]:
            tree.add(tip, token_id)
        tip = chain
    return tree if len(tree) else None
