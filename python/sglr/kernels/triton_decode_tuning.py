"""How the Triton decode attention is launched: its tile and pipeline tunables and the split count.

Plain Python (no Triton import), so the benchmark that sweeps these (`benches/decode_attention_gpu.py`)
and the tests can build and compare configurations anywhere. `DecodeTuning()` is what serving uses;
every field is a knob the benchmark varies to find better defaults per GPU.

The split count: enough (request, KV head, split) programs to fill the GPU several times over
(`programs_per_sm` per multiprocessor), from the batch size alone, so a captured graph keeps its
launch. A large batch needs no split (one program per request and KV head reads its whole sequence,
and the merge kernel is skipped); batch 1 needs many.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

DEFAULT_NUM_KV_SPLITS = 8
MAX_NUM_KV_SPLITS = 32


@dataclass(frozen=True)
class DecodeTuning:
    """block_n: keys per loop step (None: 64 up to head dim 128, else 32); num_warps / num_stages:
    the split kernel's launch options (num_stages None: Triton's default); programs_per_sm: the
    split policy's target, several resident programs per multiprocessor hide each one's load
    latency; max_splits caps it."""

    block_n: int | None = None
    num_warps: int = 4
    num_stages: int | None = None
    programs_per_sm: int = 8
    max_splits: int = MAX_NUM_KV_SPLITS

    def block_n_for(self, head_dim: int) -> int:
        if self.block_n is not None:
            return self.block_n
        return 64 if head_dim <= 128 else 32

    def launch_options(self) -> dict[str, int]:
        options = {"num_warps": self.num_warps}
        if self.num_stages is not None:
            options["num_stages"] = self.num_stages
        return options


DEFAULT_TUNING = DecodeTuning()


def num_kv_splits_for(
    batch_size: int, num_kv_heads: int, device: torch.device, tuning: DecodeTuning = DEFAULT_TUNING
) -> int:
    """The split count for a decode batch on `device`; depends on the batch size only. Off CUDA
    (the interpreter), the default."""
    if device.type != "cuda":
        return DEFAULT_NUM_KV_SPLITS
    num_sms = torch.cuda.get_device_properties(device).multi_processor_count
    return splits_to_fill(batch_size * num_kv_heads, tuning.programs_per_sm * num_sms, tuning.max_splits)


def splits_to_fill(num_pairs: int, target_programs: int, max_splits: int = MAX_NUM_KV_SPLITS) -> int:
    """The smallest power of two `s` with `num_pairs * s >= target_programs`, at most
    `max_splits` (`num_pairs`: requests x KV heads)."""
    splits = 1
    while splits < max_splits and num_pairs * splits < target_programs:
        splits *= 2
    return splits
