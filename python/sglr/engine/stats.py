"""Engine counters, updated by the scheduler thread and read (without locks) by anyone."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class EngineStats:
    started_at: float = field(default_factory=time.monotonic)
    num_requests: int = 0
    num_finished: int = 0
    num_aborted: int = 0
    num_prompt_tokens: int = 0
    num_cached_prompt_tokens: int = 0
    num_generated_tokens: int = 0
    num_jump_forward_tokens: int = 0
    num_extend_passes: int = 0
    num_extend_tokens: int = 0
    num_decode_passes: int = 0
    # Sequences summed over passes: their ratio to the pass counts is the mean batch size.
    num_extend_seqs: int = 0
    num_decode_seqs: int = 0
    max_decode_batch_size: int = 0
    num_retractions: int = 0
    num_preemptions: int = 0  # retractions for a waiting request of higher priority
    # Speculative decoding: verify passes (decode passes that carried drafts), drafts proposed and
    # accepted; accepted / verify passes is the mean accepted length.
    num_verify_passes: int = 0
    num_draft_tokens: int = 0
    num_accepted_draft_tokens: int = 0
    # The overlap schedule: decode passes whose forward ran while the previous pass's tokens were
    # applied, and rows whose request one of those tokens ended (a forward spent for nothing).
    num_overlapped_passes: int = 0
    num_overlap_dropped_rows: int = 0
    num_chained_rows: int = 0  # overlapped rows fed the pass before's token on the device
    num_steps: int = 0  # scheduler steps that ran (a watchdog sees whether the loop moves)
    num_invariant_checks: int = 0  # with `debug_invariants`: KV accounting checked after each step
    busy_seconds: float = 0.0
    # Finished requests by LoRA adapter id (0: the base model): [requests, prompt tokens,
    # generated tokens], counted once per request when it ends (the dashboard's adapter traffic).
    lora_traffic: dict[int, list[int]] = field(default_factory=dict)

    def count_finished(self, lora_id: int, num_prompt_tokens: int, num_generated_tokens: int) -> None:
        counts = self.lora_traffic.get(lora_id)
        if counts is None:
            counts = self.lora_traffic[lora_id] = [0, 0, 0]
        counts[0] += 1
        counts[1] += num_prompt_tokens
        counts[2] += num_generated_tokens

    @property
    def num_forward_passes(self) -> int:
        return self.num_extend_passes + self.num_decode_passes

    @property
    def cache_hit_rate(self) -> float:
        return self.num_cached_prompt_tokens / self.num_prompt_tokens if self.num_prompt_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        busy = max(self.busy_seconds, 1e-9)
        return {
            "num_requests": self.num_requests,
            "num_finished": self.num_finished,
            "num_aborted": self.num_aborted,
            "num_prompt_tokens": self.num_prompt_tokens,
            "num_cached_prompt_tokens": self.num_cached_prompt_tokens,
            "cache_hit_rate": self.cache_hit_rate,
            "num_generated_tokens": self.num_generated_tokens,
            "num_jump_forward_tokens": self.num_jump_forward_tokens,
            "num_forward_passes": self.num_forward_passes,
            "num_extend_passes": self.num_extend_passes,
            "num_extend_tokens": self.num_extend_tokens,
            "num_decode_passes": self.num_decode_passes,
            "num_extend_seqs": self.num_extend_seqs,
            "num_decode_seqs": self.num_decode_seqs,
            "max_decode_batch_size": self.max_decode_batch_size,
            "mean_decode_batch_size": self.num_decode_seqs / max(self.num_decode_passes, 1),
            "num_retractions": self.num_retractions,
            "num_preemptions": self.num_preemptions,
            "num_verify_passes": self.num_verify_passes,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted_draft_tokens": self.num_accepted_draft_tokens,
            "spec_accept_rate": self.num_accepted_draft_tokens / max(self.num_draft_tokens, 1),
            "spec_mean_accepted_length": self.num_accepted_draft_tokens / max(self.num_verify_passes, 1),
            "num_overlapped_passes": self.num_overlapped_passes,
            "num_overlap_dropped_rows": self.num_overlap_dropped_rows,
            "num_chained_rows": self.num_chained_rows,
            "num_invariant_checks": self.num_invariant_checks,
            "busy_seconds": self.busy_seconds,
            "generation_tokens_per_s": self.num_generated_tokens / busy,
            "prompt_tokens_per_s": (self.num_prompt_tokens - self.num_cached_prompt_tokens) / busy,
            "uptime_s": time.monotonic() - self.started_at,
            # (list() copies in one step: the scheduler thread may add an adapter meanwhile)
            "lora_traffic": {
                str(lora_id): {"num_requests": n, "num_prompt_tokens": p, "num_generated_tokens": g}
                for lora_id, (n, p, g) in list(self.lora_traffic.items())
            },
        }
