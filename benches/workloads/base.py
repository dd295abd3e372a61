"""What a workload is, and how its size follows the profile.

A `ProgramWorkload` is one sglr program and the seeded arguments of every run of it (one run =
one "program" in programs/s); a `ServingWorkload` is a list of raw requests sent to sglr-server
over HTTP. Every workload module has `build(profile, seed, vocab_size)` returning one of them,
and keeps its sizes in a `SIZES` dict with one entry per profile:

- `smoke`: a handful of short programs, for the CI test (seconds);
- `cpu`: the paper's shapes scaled to the tiny model on a 2-core machine (a few minutes in all);
- `gpu`: the paper's shapes and counts (Llama-3-8B, one GPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

PROFILES = ("smoke", "cpu", "gpu")


@dataclass(frozen=True)
class ProgramWorkload:
    """`program` run once per entry of `arguments`, with `sampling` as the run-level defaults.

    plain_generation: only unconstrained `gen` calls (no select, regex or JSON schema), so a
        plain `generate` API (the transformers baseline) can run it too.
    constrained: has regex / JSON-schema `gen` calls (where jump-forward can matter).
    """

    name: str
    program: Any
    arguments: list[dict[str, Any]]
    sampling: dict[str, Any]
    plain_generation: bool = True
    constrained: bool = False

    @property
    def num_programs(self) -> int:
        return len(self.arguments)


@dataclass(frozen=True)
class ServingWorkload:
    """Raw token-id requests (`benchlib.serving_datasets.BenchRequest`) for the HTTP server."""

    name: str
    requests: list[Any]

    @property
    def num_programs(self) -> int:
        return len(self.requests)


def sized(sizes: dict[str, dict[str, Any]], profile: str) -> SimpleNamespace:
    """The sizes of `profile`, as attributes (a KeyError names the profiles a module lacks)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    return SimpleNamespace(**sizes[profile])


#: Run-level sampling defaults of unconstrained workloads: greedy, and outputs as long as the workload
#: says (random weights would otherwise end at an arbitrary EOS, and every system would do different work).
GREEDY_FIXED_LENGTH: dict[str, Any] = {"temperature": 0.0, "ignore_eos": True}
#: Constrained workloads: greedy, and EOS honoured. NOTE: with ignore_eos, a regex-constrained request
#: whose pattern is complete (only EOS allowed) keeps decoding EOS up to max_new_tokens.
GREEDY: dict[str, Any] = {"temperature": 0.0}
