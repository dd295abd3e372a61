"""The engine's KV memory, with one owner: `KVPool`.

`KVPool` alone allocates and frees KV slots and request rows, holds the prefix index (the radix
tree, which only indexes slot ids and never frees them) and evicts from it. Requests hold KV
through a `RequestKV` record that only the pool changes. See `pool.py` for the contract.
"""

from sglr.engine.kv.pool import KVPool
from sglr.engine.kv.request_kv import RequestKV
from sglr.engine.kv.slots import SLOT_DTYPE, KVSlotAllocator
from sglr.engine.kv.tree_summary import TreeSummary, TreeSummaryLimits, summarize_tree

__all__ = [
    "SLOT_DTYPE",
    "KVPool",
    "KVSlotAllocator",
    "RequestKV",
    "TreeSummary",
    "TreeSummaryLimits",
    "summarize_tree",
]
