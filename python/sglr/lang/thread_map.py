"""Running one function over many items on a thread pool (`run_batch`), in input order."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# `generator_style` runs this many items at a time, so results arrive before the whole batch ends.
GENERATOR_CHUNK = 200


def _resolve_num_threads(num_threads: int | str, num_items: int) -> int:
    if num_threads == "auto":
        num_threads = max(96, (os.cpu_count() or 1) * 16)
    if not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be 'auto' or a positive int, got {num_threads!r}")
    return max(1, min(num_threads, num_items))


def map_in_threads(
    func: Callable[[T], R], items: Sequence[T], num_threads: int | str, progress_bar: bool
) -> list[R]:
    """`[func(x) for x in items]` on a thread pool, in input order, with an optional tqdm bar."""
    num_threads = _resolve_num_threads(num_threads, len(items))
    bar = _progress_bar(len(items)) if progress_bar else None
    try:
        if num_threads == 1:
            results = []
            for item in items:
                results.append(func(item))
                if bar is not None:
                    bar.update(1)
            return results
        with ThreadPoolExecutor(num_threads) as pool:
            futures = [pool.submit(func, item) for item in items]
            if bar is not None:
                for future in futures:
                    future.add_done_callback(lambda _: bar.update(1))
            return [future.result() for future in futures]
    finally:
        if bar is not None:
            bar.close()


def map_in_order(
    func: Callable[[T], R], items: Sequence[T], num_threads: int | str, progress_bar: bool
) -> Iterator[R]:
    """`map_in_threads` as a generator: yields results in input order, chunk by chunk."""
    for start in range(0, len(items), GENERATOR_CHUNK):
        yield from map_in_threads(func, items[start : start + GENERATOR_CHUNK], num_threads, progress_bar)


def _progress_bar(total: int) -> Any:
    # tqdm is optional: imported only when a progress bar is asked for.
    from tqdm.auto import tqdm

    return tqdm(total=total)
