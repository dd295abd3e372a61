"""`RequestKV`: one request's hold on KV memory. Read by anyone; changed only by `KVPool`.

Token `i` of the request (`fill_ids[i]`, prompt then output) has its KV in `slots[i]`:
- `slots[:num_tree_owned]` belong to the prefix index, protected by the lock on `locked_node`;
- `slots[num_tree_owned:num_computed]` are the request's own, with KV written;
- `slots[num_computed:num_reserved]` are the request's own, allocated for the step now running.
`stale_cols`: columns of the device row whose slots changed since the row was last written
(the pool switched duplicates to the index's slots); the next decode batch rewrites them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sglr.engine.kv.slots import SLOT_DTYPE


@dataclass(eq=False)
class RequestKV:
    row: int | None = None
    slots: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=SLOT_DTYPE))
    num_tree_owned: int = 0
    num_computed: int = 0
    num_reserved: int = 0
    locked_node: int | None = None
    stale_cols: np.ndarray | None = None

    @property
    def is_admitted(self) -> bool:
        return self.row is not None

    @property
    def num_owned_slots(self) -> int:
        """Slots this request alone holds (written or reserved)."""
        return self.num_reserved - self.num_tree_owned

    @property
    def num_pending(self) -> int:
        """Reserved slots whose KV the running step is writing."""
        return self.num_reserved - self.num_computed

    def computed_slots(self) -> np.ndarray:
        return self.slots[: self.num_computed]

    def pending_slots(self) -> np.ndarray:
        return self.slots[self.num_computed : self.num_reserved]

    def grow_to(self, num_tokens: int) -> None:
        """Makes room for `num_tokens` slot ids (the pool calls it before writing them)."""
        if self.slots.size < num_tokens:
            grown = np.zeros(max(num_tokens, 2 * self.slots.size, 64), dtype=SLOT_DTYPE)
            grown[: self.num_reserved] = self.slots[: self.num_reserved]
            self.slots = grown
