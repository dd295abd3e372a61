"""The soak's process faults, injected while the clients run: a tensor-parallel worker
SIGKILLed (its server's engine dies; the cluster restarts that server, as a deployment's
supervisor would), a worker SIGSTOPped then resumed, and the router restarted. Each fault is a
window of time (from injection to recovery) that the report uses to tell which failures a fault
explains. The faults of a client (leaving, reading slowly, aborting) and the bad inputs come
from the clients themselves (`traffic.py`, `requests.py`).

The destructive faults run in the first half of the run, so the second half measures resident
memory over processes that live through it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from dataclasses import dataclass

from .cluster import Cluster

logger = logging.getLogger("soak")
SUSPEND_S = 3.0


@dataclass
class FaultWindow:
    name: str
    started: float
    ended: float | None = None

    def overlaps(self, started: float, ended: float) -> bool:
        return started <= (self.ended if self.ended is not None else float("inf")) and ended >= self.started


async def _wait_recovered(cluster: Cluster, timeout: float = 240) -> None:
    await asyncio.to_thread(cluster.wait_routable, len(cluster.servers), timeout)


async def kill_worker(cluster: Cluster, windows: list[FaultWindow]) -> None:
    name = cluster.servers[-1].name  # the tensor-parallel one
    pids = cluster.worker_pids(name)
    if not pids:
        raise AssertionError(f"{name} has no worker process to kill")
    window = FaultWindow(f"SIGKILL a worker of {name}", time.monotonic())
    windows.append(window)
    os.kill(pids[-1], signal.SIGKILL)
    logger.info("killed worker pid %d of %s", pids[-1], name)
    await supervise_until_healthy(cluster, name)
    await _wait_recovered(cluster)
    window.ended = time.monotonic()


async def supervise_until_healthy(cluster: Cluster, name: str, timeout: float = 60) -> None:
    """Waits for the server's health to fail (its engine died), then restarts it."""
    deadline = time.monotonic() + timeout
    while name not in await asyncio.to_thread(cluster.unhealthy_servers):
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} still reports healthy {timeout:.0f} s after losing a worker")
        await asyncio.sleep(0.2)
    await asyncio.to_thread(cluster.restart_server, name)


async def suspend_worker(cluster: Cluster, windows: list[FaultWindow]) -> None:
    name = cluster.servers[0].name
    (pid, *_) = cluster.worker_pids(name)
    window = FaultWindow(f"SIGSTOP a worker of {name} for {SUSPEND_S:.0f} s", time.monotonic())
    windows.append(window)
    os.kill(pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(SUSPEND_S)
    finally:
        os.kill(pid, signal.SIGCONT)
    window.ended = time.monotonic()


async def restart_router(cluster: Cluster, windows: list[FaultWindow]) -> None:
    window = FaultWindow("router restarted (SIGTERM, then started again)", time.monotonic())
    windows.append(window)
    await asyncio.to_thread(cluster.restart_router)
    await _wait_recovered(cluster)
    window.ended = time.monotonic()


# Where in a cycle each fault starts; the cycles fill the first half of the run, one per 10
# minutes of run (at least one). A fault starts no earlier than the previous one's recovery.
CYCLE = ((0.24, kill_worker), (0.56, restart_router), (0.80, suspend_worker))
CYCLE_EVERY_S = 600.0


async def inject_faults(
    cluster: Cluster, started: float, duration_s: float, windows: list[FaultWindow]
) -> None:
    num_cycles = max(1, int(duration_s // CYCLE_EVERY_S))
    cycle_s = duration_s / 2 / num_cycles
    for cycle in range(num_cycles):
        for fraction, fault in CYCLE:
            delay = started + (cycle + fraction) * cycle_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await fault(cluster, windows)
            cluster.remember()
