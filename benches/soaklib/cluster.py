"""The soak's processes: `sglr-router` in front of two `sglr-server`s (the second with two
tensor-parallel worker processes and n-gram speculative decoding), on fixed loopback ports so a
restarted process keeps its URL.

The cluster supervises as a deployment would: a server whose engine died (its `/health`
answers 503) is stopped and started again on the same port, and the router takes it back
through its own health checks. Every process id the cluster ever saw is remembered, so the
end of the run can prove that none outlived its parent.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from sglr.testing.processes import Process, start


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ServerSpec:
    name: str
    tp_size: int
    port: int = field(default_factory=free_port)
    extra_args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Cluster:
    model_dir: Path
    max_total_tokens: int = 4096
    max_body_bytes: int = 1 << 20
    lora_paths: tuple[str, ...] = ()  # `name=path` adapters every server loads at start
    servers: list[ServerSpec] = field(
        default_factory=lambda: [
            ServerSpec("server-tp1", 1),
            ServerSpec("server-tp2", 2, extra_args=("--speculative-algorithm", "NGRAM")),
        ]
    )
    router_port: int = field(default_factory=free_port)
    processes: dict[str, Process] = field(default_factory=dict)
    pids_seen: dict[int, str] = field(default_factory=dict)
    num_restarts: dict[str, int] = field(default_factory=dict)
    last_started: dict[str, float] = field(default_factory=dict)  # role -> monotonic time
    past_outputs: list[tuple[str, str]] = field(default_factory=list)  # (role, output) of stopped ones

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    def start(self) -> None:
        with ThreadPoolExecutor(len(self.servers)) as pool:  # they load at the same time
            list(pool.map(self._start_server, self.servers))
        self._start_router()
        self.wait_routable(len(self.servers), timeout=120)

    def _start_server(self, spec: ServerSpec) -> None:
        argv = ["-m", "sglr", "--model-path", str(self.model_dir), "--device", "cpu"]
        argv += ["--port", str(spec.port), "--tp-size", str(spec.tp_size), "--log-level", "error"]
        argv += ["--max-total-tokens", str(self.max_total_tokens), "--enable-metrics"]
        argv += ["--max-body-bytes", str(self.max_body_bytes), *spec.extra_args]
        if self.lora_paths:
            argv += ["--lora-paths", *self.lora_paths]
        self.processes[spec.name] = start(argv, timeout=300)
        self.last_started[spec.name] = time.monotonic()
        self.remember()

    def _start_router(self) -> None:
        argv = ["-m", "sglr.router", "--port", str(self.router_port), "--log-level", "error"]
        argv += ["--health-check-interval", "0.5", "--health-failure-threshold", "1"]
        argv += ["--shutdown-timeout", "30", "--worker-urls", *(spec.url for spec in self.servers)]
        self.processes["router"] = start(argv, timeout=60)
        self.last_started["router"] = time.monotonic()
        self.remember()

    def wait_routable(self, num_workers: int, timeout: float) -> None:
        """Until the router routes to `num_workers` healthy workers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                workers = httpx.get(f"{self.router_url}/list_workers", timeout=5).json()
                healthy = [w for w in workers.get("workers", []) if w.get("healthy")]
                if len(healthy) >= num_workers:
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"the router did not route to {num_workers} workers in {timeout:.0f} s")

    def remember(self) -> None:
        """Notes every live process of the cluster (workers come and go with restarts)."""
        for role, process in list(self.processes.items()):
            self.pids_seen.setdefault(process.popen.pid, role)
            for child in process.descendants():
                self.pids_seen.setdefault(child.pid, f"{role} child")

    def worker_pids(self, name: str) -> list[int]:
        """The tensor-parallel worker processes of server `name`."""
        return [child.pid for child in self.processes[name].descendants() if "worker" in _cmdline(child)]

    def restart_router(self) -> None:
        self.processes["router"].stop(signal.SIGTERM, timeout=60)
        self.past_outputs.append(("router", self.processes["router"].output()))
        self._start_router()

    def restart_server(self, name: str) -> None:
        spec = next(s for s in self.servers if s.name == name)
        self.processes[name].stop(signal.SIGTERM, timeout=60)
        self.past_outputs.append((name, self.processes[name].output()))
        self._start_server(spec)
        self.num_restarts[name] = self.num_restarts.get(name, 0) + 1

    def unhealthy_servers(self) -> list[str]:
        names = []
        for spec in self.servers:
            try:
                ok = httpx.get(f"{spec.url}/health", timeout=5).status_code == 200
            except httpx.HTTPError:
                ok = False
            if not ok:
                names.append(spec.name)
        return names

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory per process tree (a server with its workers; the router)."""
        sizes = {}
        for role, process in list(self.processes.items()):
            total = 0
            with contextlib.suppress(psutil.NoSuchProcess):  # a process being restarted
                for proc in [psutil.Process(process.popen.pid), *process.descendants()]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        total += proc.memory_info().rss
            sizes[role] = total
        return sizes

    def outputs(self) -> list[tuple[str, str]]:
        """What every process the cluster ran printed (errors only: they log at error level)."""
        return [*self.past_outputs, *((role, p.output()) for role, p in self.processes.items())]

    def stop(self) -> list[str]:
        """Stops the router, then the servers; returns the processes that outlived them."""
        self.remember()
        for role in ["router", *(spec.name for spec in self.servers)]:
            process = self.processes.get(role)
            if process is None:
                continue
            with contextlib.suppress(AssertionError):  # orphans: reported below, from pids_seen
                process.stop(signal.SIGTERM, timeout=60)
        orphans = []
        for pid, role in self.pids_seen.items():
            try:
                proc = psutil.Process(pid)
                if proc.status() != psutil.STATUS_ZOMBIE:
                    orphans.append(f"{role} pid {pid}")
                    proc.kill()
            except psutil.NoSuchProcess:
                pass
        return orphans


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""
