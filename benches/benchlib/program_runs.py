"""Runs a `ProgramWorkload` on a backend and times every program.

This is `Program.run_batch` with a clock around each program: the frontend hint (the batch's
shared constant prefix, cached first) when `hint` is on, then every program on a thread pool.
`parallel=False` runs each program's statements one at a time in its own thread (no async
submission, forks and nested calls one after the other: the program as plain Python would run
it); the batch itself still runs concurrently, so the ablation removes only the interpreter's
parallelism.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sglr.lang.thread_map import map_in_threads


@dataclass
class BatchOutcome:
    seconds: float
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def run_programs(workload: Any, backend: Any, *, parallel: bool = True, hint: bool = True) -> BatchOutcome:
    program = workload.program

    def run_one(arguments: dict[str, Any]) -> tuple[float, str | None]:
        started = time.perf_counter()
        state = program.run(backend=backend, use_thread=parallel, **workload.sampling, **arguments)
        error = state.error()  # waits for the program to finish
        return time.perf_counter() - started, None if error is None else str(error)

    started = time.perf_counter()
    if hint and workload.num_programs > 1:
        program.cache(backend)
    results = map_in_threads(run_one, workload.arguments, "auto", False)
    outcome = BatchOutcome(time.perf_counter() - started)
    for latency, error in results:
        outcome.latencies.append(latency)
        if error is not None:
            outcome.errors.append(error)
    return outcome
