"""Tensor parallelism over torch.distributed: the rank's group, its collectives, and how a
model's weights split across ranks.

Attention heads split across ranks (each rank computes `num_heads / tp` query heads and keeps
its own KV heads; when there are fewer KV heads than ranks, ranks share a KV head and each holds
a copy). Column-parallel linears (q/k/v, gate/up) keep a rank's rows; row-parallel ones (o,
down) keep its columns and all-reduce their outputs: one all-reduce per attention block and one
per MLP. The embedding and the LM head split the vocabulary (padded to a multiple of the rank
count): the embedding all-reduces, the head all-gathers the logits.

Collectives run on the device group (gloo on CPU, NCCL on GPU); Python objects (a batch's
recipe) go through a gloo group on the CPU.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from sglr.errors import ModelConfigError


@dataclass(frozen=True)
class TensorParallel:
    rank: int
    size: int
    group: Any  # the device group
    cpu_group: Any  # gloo, for Python objects
    # Rank 0 holds it from a recipe's broadcast to its last collective: the other ranks run the
    # recipes in the order sent, so one thread's recipe (the overlapped forward) must not
    # interleave with another's (a KV tier's page move).
    recipe_lock: Any = field(default_factory=threading.RLock, compare=False, repr=False)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x, group=self.group)
        return x

    def all_gather_last(self, x: torch.Tensor) -> torch.Tensor:
        """Concatenates every rank's `x` along the last dimension (rank order)."""
        parts = [torch.empty_like(x) for _ in range(self.size)]
        dist.all_gather(parts, x.contiguous(), group=self.group)
        return torch.cat(parts, dim=-1)

    def broadcast_from_first(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank (others pass anything)."""
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.cpu_group)
        return box[0]

    def min_over_ranks(self, value: int) -> int:
        tensor = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MIN, group=self.cpu_group)
        return int(tensor.item())


def rank_and_size(tp: TensorParallel | None) -> tuple[int, int]:
    """(this rank, number of ranks); (0, 1) without tensor parallelism."""
    return (tp.rank, tp.size) if tp is not None else (0, 1)


def init_tensor_parallel(rank: int, size: int, init_method: str, device: torch.device) -> TensorParallel:
    """Joins the group of `size` ranks meeting at `init_method` (`tcp://host:port`)."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    timeout = timedelta(minutes=10)
    dist.init_process_group(backend, init_method=init_method, world_size=size, rank=rank, timeout=timeout)
    group = dist.group.WORLD
    cpu_group = group if backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
    return TensorParallel(rank, size, group, cpu_group)


@dataclass(frozen=True)
class HeadSplit:
    """Which attention heads a rank computes and which checkpoint rows hold them."""

    num_heads: int  # query heads on this rank
    num_kv_heads: int  # KV heads on this rank (a shared copy when KV heads < ranks)
    q_start: int  # first query head
    kv_start: int  # first KV head

    @classmethod
    def of(cls, num_heads: int, num_kv_heads: int, rank: int, size: int) -> HeadSplit:
        if num_heads % size:
            raise ModelConfigError(f"{num_heads} attention heads do not split over tp_size={size}")
        if num_kv_heads >= size and num_kv_heads % size:
            raise ModelConfigError(f"{num_kv_heads} KV heads do not split over tp_size={size}")
        if num_kv_heads < size and size % num_kv_heads:
            raise ModelConfigError(f"tp_size={size} is not a multiple of the {num_kv_heads} KV heads")
        local_heads = num_heads // size
        if num_kv_heads >= size:
            local_kv = num_kv_heads // size
            kv_start = rank * local_kv
        else:  # several ranks share (a copy of) one KV head
            local_kv = 1
            kv_start = rank * num_kv_heads // size
        return cls(local_heads, local_kv, rank * local_heads, kv_start)


def vocab_shard(vocab_size: int, rank: int, size: int) -> tuple[int, int]:
    """(first id, rows per rank) of the rank's vocabulary slice; the last one may be padding."""
    rows = -(-vocab_size // size)
    return rank * rows, rows


def check_tensor_parallel(config: Any, size: int) -> None:
    """Raises `ModelConfigError` when the model's heads or MLP do not split over `size` ranks
    (checked before any worker starts)."""
    for rank in range(size):
        HeadSplit.of(config.num_attention_heads, config.num_key_value_heads, rank, size)
    if config.intermediate_size % size:
        raise ModelConfigError(
            f"intermediate_size {config.intermediate_size} does not split over tp_size={size}"
        )
    moe = getattr(config, "moe", None)
    for expert_size in moe.intermediate_sizes() if moe is not None else ():
        if expert_size % size:
            raise ModelConfigError(
                f"expert intermediate size {expert_size} does not split over tp_size={size}"
            )
