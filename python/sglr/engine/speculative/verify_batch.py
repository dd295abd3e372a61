"""A verify pass's batch: every request's last token and each of its draft tokens as a row.

A decode batch already attends each row to the slots its request-table row names, after storing
every row's K/V; so a draft tree needs no mask of its own. Request b's last token keeps its own
row (its prefix, as in plain decode); draft node i gets one of the runner's draft rows, which
starts as a copy of the request's row up to and including the last token (`row_copies`) and adds
the slots of the node's ancestors (`row_writes`) and its own: it sees exactly its prefix and its
path, at position prefix + depth. Slots come from the pool's reservation for the request, in
row order (last token, then nodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sglr.engine.kv.row_writes import PendingRowWrites
from sglr.engine.request import Req
from sglr.engine.speculative.tree import DraftTree
from sglr.errors import InvariantError
from sglr.model.batch_rows import RowCopies, RowWrites


@dataclass(frozen=True)
class VerifyLayout:
    req_rows: np.ndarray
    input_ids: np.ndarray
    seq_lens: np.ndarray
    out_slots: np.ndarray
    row_writes: RowWrites | None
    row_copies: RowCopies | None
    first_rows: list[int]  # per request: its last token's row in the batch (nodes follow)


def layout_verify(
    reqs: Sequence[Req],
    trees: Sequence[DraftTree | None],
    draft_rows: np.ndarray,
    stale: PendingRowWrites | None,
) -> VerifyLayout:
    rows, ids, lens, slots, first_rows = [], [], [], [], []
    write_rows, write_cols, write_slots = [], [], []
    copy_src, copy_dst, copy_lens = [], [], []
    if stale is not None:
        write_rows, write_cols, write_slots = [stale.rows], [stale.cols], [stale.slots]
    next_draft_row = 0
    for req, tree in zip(reqs, trees, strict=True):
        kv = req.kv
        num_nodes = 0 if tree is None else len(tree)
        pending = kv.pending_slots()
        if kv.row is None or pending.size != 1 + num_nodes:
            raise InvariantError(f"request {req.rid}: {pending.size} reserved slots for {num_nodes} drafts")
        computed = kv.num_computed
        first_rows.append(len(rows))
        rows.append(kv.row)
        ids.append(req.output_ids[-1])
        lens.append(computed + 1)
        slots.append(int(pending[0]))
        if tree is None:
            continue
        node_rows = draft_rows[next_draft_row : next_draft_row + num_nodes]
        if node_rows.size != num_nodes:
            raise InvariantError("a verify pass with more drafts than the runner's draft rows")
        next_draft_row += num_nodes
        for node in range(num_nodes):
            row = int(node_rows[node])
            depth = tree.depths[node]
            rows.append(row)
            ids.append(tree.token_ids[node])
            lens.append(computed + 1 + depth)
            slots.append(int(pending[1 + node]))
            copy_src.append(kv.row)
            copy_dst.append(row)
            copy_lens.append(computed + 1)
            ancestors = tree.path(node)[:-1]
            if ancestors:
                write_rows.append(np.full(len(ancestors), row, dtype=np.int64))
                write_cols.append(np.array([computed + tree.depths[a] for a in ancestors], dtype=np.int64))
                write_slots.append(pending[1 + np.array(ancestors)].astype(np.int64))
    row_writes = (
        RowWrites(np.concatenate(write_rows), np.concatenate(write_cols), np.concatenate(write_slots))
        if write_rows
        else None
    )
    row_copies = (
        RowCopies(np.array(copy_src, np.int64), np.array(copy_dst, np.int64), np.array(copy_lens, np.int64))
        if copy_src
        else None
    )
    return VerifyLayout(
        np.array(rows, np.int64),
        np.array(ids, np.int64),
        np.array(lens, np.int64),
        np.array(slots, np.int64),
        row_writes,
        row_copies,
        first_rows,
    )
