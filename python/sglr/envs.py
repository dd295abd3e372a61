"""The one place sglr reads environment variables (each read happens at call time, not import)."""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where sglr keeps generated artifacts (e.g. tiny test models): `$SGLR_CACHE_DIR`, else
    `$XDG_CACHE_HOME/sglr`, else `~/.cache/sglr`."""
    explicit = os.environ.get("SGLR_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "sglr"


def triton_interpret() -> bool:
    """Whether Triton kernels run in the CPU interpreter (`TRITON_INTERPRET=1`)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def cpu_prepack() -> bool:
    """Whether models that opt in run their CPU matmuls on prepacked weight copies
    (`SGLR_CPU_PREPACK=0` turns it off: slower, but no second copy of the weights in memory)."""
    return os.environ.get("SGLR_CPU_PREPACK", "1") not in ("", "0")


def cpu_moe_kernel() -> bool:
    """Whether float32 CPU expert MLPs run in `sglr._core.moe_expert_mlp` (rust/kernels' moe) on
    panel-packed weights; `SGLR_CPU_MOE_KERNEL=0`: the torch loop over oneDNN-prepacked experts."""
    return os.environ.get("SGLR_CPU_MOE_KERNEL", "1") not in ("", "0")


def cpu_fused_decode() -> bool:
    """Whether CPU decode steps of eligible 4-bit models run as one Rust call
    (`sglr.model.cpu_fused_decode`); `SGLR_CPU_FUSED_DECODE=0`: the layered path."""
    return os.environ.get("SGLR_CPU_FUSED_DECODE", "1") not in ("", "0")


def cpu_decode_threads() -> int | None:
    """`SGLR_CPU_DECODE_THREADS=N`: CPU decode steps run on at most N torch threads (prefill keeps
    all of them), and the fused decode step (`sglr.model.cpu_fused_decode`) on a pool of N;
    unset or 0: no cap. On a CPU shared with other work, a decode step's many
    small parallel regions wait for descheduled threads (benches/results/smollm2_cpu_gguf.md)."""
    value = os.environ.get("SGLR_CPU_DECODE_THREADS", "")
    try:
        threads = int(value) if value else 0
    except ValueError:
        raise ValueError(f"SGLR_CPU_DECODE_THREADS must be an integer, got {value!r}") from None
    return threads if threads > 0 else None


@functools.cache
def cpu_isa() -> str:
    """The instruction set of the Rust CPU kernels (`portable`, `avx2` or `avx512vnni`): the best
    this CPU offers, capped by `SGLR_CPU_ISA` (to run a lesser CPU's code paths, e.g. in tests).
    rust/kernels reads the variable once per process; a cap above the CPU's is lowered to it
    (logged once: vector code the CPU lacks never runs); another value raises ValueError."""
    from sglr._core import cpu_isa as kernels_isa

    isa, cpu, requested = kernels_isa()
    if requested is not None and requested != isa:
        logger.warning(
            "SGLR_CPU_ISA=%s: this CPU offers at most %s; the CPU kernels use %s", requested, cpu, isa
        )
    return isa
