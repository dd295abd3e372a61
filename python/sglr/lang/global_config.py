"""Process-wide settings of the language (`sgl.global_config`), mutable at run time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class GlobalConfig:
    #: 2 prints each program's text after it runs.
    verbosity: int = 0
    #: The backend `run`/`run_batch` use when none is passed (`sgl.set_default_backend`).
    default_backend: Any = None
    #: `run_batch` traces the function and caches its constant prompt prefix once (the hint).
    enable_precache_with_tracing: bool = True
    #: `join(mode="concate_and_append")` joins KV caches when the backend supports it.
    enable_parallel_encoding: bool = True
    #: Shortest constant prefix (characters) worth sending to the backend as a cache hint.
    min_prefix_hint_chars: int = 64


global_config = GlobalConfig()
