"""`ReqToTokenTable`: per running request, the KV slot of each of its tokens, on the device.

Row `r`, column `i` holds the slot of token `i` of the request that owns row `r`. Attention
kernels read a request's KV through its row, so no step builds per-request slot lists. The
runner is the table's only writer: every forward batch carries the entries it needs (an extend
its requests' whole rows, a decode the new column plus any rewritten ones). Row ids are handed
out by the engine's KV owner; row 0 is reserved for padded batch entries (CUDA graphs). Rows
after `max_num_reqs` (`num_draft_rows` of them) belong to no request: a speculative verify pass
fills one per draft token with that token's prefix and tree path (the tree attention mask,
expressed as the slots each query attends to).
"""

from __future__ import annotations

import torch

PADDING_ROW = 0


class ReqToTokenTable:
    def __init__(
        self, max_num_reqs: int, max_context_len: int, device: torch.device | str, num_draft_rows: int = 0
    ) -> None:
        if max_num_reqs < 1 or max_context_len < 1:
            raise ValueError("max_num_reqs and max_context_len must be >= 1")
        self.max_num_reqs = max_num_reqs
        self.max_context_len = max_context_len
        # int32 halves the memory and is what the kernels index with.
        self.num_draft_rows = num_draft_rows
        num_rows = max_num_reqs + num_draft_rows + 1
        self.table = torch.zeros((num_rows, max_context_len), dtype=torch.int32, device=device)
