"""The systems a workload runs on: sglr with everything on, its ablations, and the baselines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workloads.base import ProgramWorkload, ServingWorkload


@dataclass(frozen=True)
class System:
    """engine_options: `EngineConfig` fields over the profile's (systems with equal options share
    one engine). parallel / hint: the interpreter's parallelism and frontend hints (programs only).
    serves_http: also runs the serving workloads (raw HTTP requests: no interpreter, no hints,
    no constraints, so only engine-level systems tell anything there).
    """

    name: str
    description: str
    engine_options: dict[str, Any] = field(default_factory=dict)
    parallel: bool = True
    hint: bool = True
    is_transformers: bool = False
    constrained_only: bool = False
    serves_http: bool = True

    def applies_to(self, workload: ProgramWorkload | ServingWorkload) -> bool:
        if isinstance(workload, ServingWorkload):
            return self.serves_http
        if self.is_transformers:
            return workload.plain_generation
        if self.constrained_only:
            return workload.constrained
        return True

    @property
    def engine_key(self) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted(self.engine_options.items()))


SYSTEMS: dict[str, System] = {
    system.name: system
    for system in (
        System("sglr", "radix cache, lpm schedule, interpreter parallelism, frontend hints, jump-forward"),
        System(
            "no-cache",
            "the vLLM-0.2-like baseline: same engine, no prefix reuse (FCFS, and no hints to send)",
            {"disable_radix_cache": True, "schedule_policy": "fcfs"},
            hint=False,
        ),
        System("fcfs", "radix cache, first-come-first-served admission", {"schedule_policy": "fcfs"}),
        System("random", "radix cache, random admission order", {"schedule_policy": "random"}),
        System(
            "sequential",
            "no interpreter parallelism: each program's calls one at a time",
            parallel=False,
            serves_http=False,
        ),
        System(
            "no-hint",
            "no frontend hints (no prefix prefill before a batch or a fork)",
            hint=False,
            serves_http=False,
        ),
        System(
            "no-jump-forward",
            "constrained output decoded one token at a time (constrained workloads only)",
            {"disable_jump_forward": True},
            constrained_only=True,
            serves_http=False,
        ),
        System(
            "transformers",
            "Hugging Face transformers generate on the same weights, one call at a time (plain generation only)",
            is_transformers=True,
            serves_http=False,
        ),
    )
}
BASELINE = "no-cache"
