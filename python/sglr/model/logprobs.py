"""Log-probabilities of given tokens (and the top-k alternatives) from logits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class TokenLogprobs:
    """Per scored position: the logprob of the token that came next, and optionally the top-k.

    `token_ids[i]` / `logprobs[i]`: the scored token and its logprob.
    `top_ids[i]` / `top_logprobs[i]`: the k most likely tokens there, most likely first
    (shape `[n, k]`; `k == 0` when not asked for).
    """

    token_ids: np.ndarray
    logprobs: np.ndarray
    top_ids: np.ndarray
    top_logprobs: np.ndarray

    def __len__(self) -> int:
        return int(self.token_ids.size)

    @classmethod
    def concat(cls, parts: list[TokenLogprobs], top_k: int) -> TokenLogprobs:
        if not parts:
            return cls(
                np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, top_k), np.int64),
                np.zeros((0, top_k), np.float32),
            )  # fmt: skip
        if len(parts) == 1:
            return parts[0]
        return cls(
            np.concatenate([p.token_ids for p in parts]),
            np.concatenate([p.logprobs for p in parts]),
            np.concatenate([p.top_ids for p in parts]),
            np.concatenate([p.top_logprobs for p in parts]),
        )


def score_tokens(
    logits: torch.Tensor, token_ids: torch.Tensor, top_k: int = 0, chunk_rows: int = 1024
) -> TokenLogprobs:
    """`logits` `[N, V]`, `token_ids` `[N]` -> logprob of `token_ids[i]` under `log_softmax(logits[i])`.

    Works through `chunk_rows` rows at a time so long prompts never hold `[N, V]` fp32 logprobs.
    """
    num_rows = logits.shape[0]
    chosen, top_vals, top_ids = [], [], []
    k = min(top_k, logits.shape[-1])
    for start in range(0, num_rows, chunk_rows):
        rows = torch.log_softmax(logits[start : start + chunk_rows].float(), dim=-1)
        ids = token_ids[start : start + chunk_rows].long()
        chosen.append(rows.gather(1, ids[:, None]).squeeze(1))
        if k:
            vals, idx = rows.topk(k, dim=-1)
            top_vals.append(vals)
            top_ids.append(idx)
    return TokenLogprobs(
        token_ids=token_ids.cpu().numpy().astype(np.int64),
        logprobs=_cat(chosen, (0,)),
        top_ids=_cat(top_ids, (num_rows, 0)).astype(np.int64) if k else np.zeros((num_rows, 0), np.int64),
        top_logprobs=_cat(top_vals, (num_rows, 0)) if k else np.zeros((num_rows, 0), np.float32),
    )


def _cat(parts: list[torch.Tensor], empty_shape: tuple[int, ...]) -> np.ndarray:
    if not parts:
        return np.zeros(empty_shape, np.float32)
    return torch.cat(parts).cpu().numpy()
