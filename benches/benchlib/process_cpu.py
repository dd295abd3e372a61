"""A process's CPU time so far, in seconds: from /proc/<pid>/task/*/schedstat where it exists
(nanoseconds on the CPU, every thread), else psutil's user + system times (clock ticks of
10 ms: too coarse for a few hundred microsecond-long requests)."""

from __future__ import annotations

from pathlib import Path


def cpu_seconds(pid: int) -> float:
    tasks = Path(f"/proc/{pid}/task")
    if tasks.is_dir():
        total_ns = 0
        for task in tasks.iterdir():
            try:
                total_ns += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that just ended
        return total_ns / 1e9
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system
