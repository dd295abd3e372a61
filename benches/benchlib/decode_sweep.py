"""The tunables sweep of `benches/decode_attention_gpu.py`, apart from any GPU: which configurations
to try, in which order, and which one wins.

One shape's search is a coordinate descent from the serving default: each tunable in turn takes
every value of its axis while the others hold their best so far, keeping a change only when it is
faster; then the split count once more under the final tile. Only a configuration whose output
agrees with the reference (`ok`) can win. Across shapes, `common_tile` picks one tile for all
(the split count stays per shape: it is the split policy's job).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """One launch of the decode attention: tile options (`DecodeTuning`'s) and an explicit split
    count."""

    block_n: int
    num_warps: int
    num_stages: int | None
    num_splits: int

    def tile(self) -> tuple[int, int, int | None]:
        return (self.block_n, self.num_warps, self.num_stages)

    def label(self) -> str:
        stages = "default" if self.num_stages is None else str(self.num_stages)
        return f"BLOCK_N={self.block_n} warps={self.num_warps} stages={stages} splits={self.num_splits}"


@dataclass(frozen=True)
class Axes:
    """The values each tunable may take."""

    block_n: Sequence[int]
    num_warps: Sequence[int]
    num_stages: Sequence[int | None]
    num_splits: Sequence[int]


@dataclass(frozen=True)
class Measured:
    config: Config
    seconds: float
    ok: bool


# (config) -> (seconds, output agrees with the reference)
Measure = Callable[[Config], tuple[float, bool]]


def descend(start: Config, axes: Axes, measure: Measure, out_of_time: Callable[[], bool]) -> list[Measured]:
    """Every configuration measured for one shape, in order (each at most once); stops early,
    keeping what it has, once `out_of_time()`."""
    seen: dict[Config, Measured] = {}

    def run(config: Config) -> Measured:
        if config not in seen:
            seconds, ok = measure(config)
            seen[config] = Measured(config, seconds, ok)
        return seen[config]

    best = run(start)
    order = [("num_splits", axes.num_splits), ("block_n", axes.block_n), ("num_warps", axes.num_warps)]
    order += [("num_stages", axes.num_stages), ("num_splits", axes.num_splits)]
    for name, values in order:
        for value in values:
            if out_of_time():
                return list(seen.values())
            candidate = run(dataclasses.replace(best.config, **{name: value}))
            if candidate.ok and (not best.ok or candidate.seconds < best.seconds):
                best = candidate
    return list(seen.values())


def fastest(results: Sequence[Measured]) -> Measured | None:
    good = [r for r in results if r.ok]
    return min(good, key=lambda r: r.seconds) if good else None


def common_tile(
    per_shape: Sequence[Sequence[Measured]],
) -> tuple[tuple[int, int, int | None], float] | None:
    """The tile whose slowdown against each shape's fastest configuration has the smallest
    geometric mean, among the tiles measured on every shape (each shape at its best split count
    for that tile) -> (tile, geometric-mean slowdown)."""
    best_by_shape = [fastest(results) for results in per_shape]
    if not per_shape or any(b is None for b in best_by_shape):
        return None
    tiles: set[tuple[int, int, int | None]] | None = None
    for results in per_shape:
        shape_tiles = {r.config.tile() for r in results if r.ok}
        tiles = shape_tiles if tiles is None else tiles & shape_tiles
    scored = []
    for tile in sorted(tiles or (), key=str):
        logs = []
        for results, best in zip(per_shape, best_by_shape, strict=True):
            assert best is not None
            seconds = min(r.seconds for r in results if r.ok and r.config.tile() == tile)
            logs.append(math.log(seconds / best.seconds))
        scored.append((math.exp(sum(logs) / len(logs)), tile))
    if not scored:
        return None
    slowdown, tile = min(scored)
    return tile, slowdown
