"""`Runtime(...)`: starts a local sglr-server in a child process and talks to it as a backend.

The server module (`sglr.server.launch`) is not part of sglr yet; until it is, `Runtime` raises
`BackendUnavailableError` and says what to use instead. The process handling below (free port,
health polling, shutdown) is ready for it and is exercised by the tests with a stand-in server.
"""

from __future__ import annotations

import atexit
import importlib.util
import socket
import subprocess
import sys
import time
from typing import Any

import httpx

from sglr.errors import BackendUnavailableError
from sglr.lang.backend.runtime_endpoint import RuntimeEndpoint

SERVER_MODULE = "sglr.server.launch"


def find_free_port(start: int, host: str = "127.0.0.1") -> int:
    """The first port >= `start` that can be bound on `host`."""
    for port in range(start, start + 1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port in [{start}, {start + 1000})")


def server_args_to_cli(kwargs: dict[str, Any]) -> list[str]:
    """`model_path="m", tp_size=2, trust_remote_code=True` -> `--model-path m --tp-size 2 --trust-remote-code`."""
    argv: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


class Runtime:
    """A local server process plus a `RuntimeEndpoint` to it (`runtime.endpoint`).

    `Runtime(model_path=..., port=30000, **server_args)`; keyword arguments become the server's
    command-line flags. `shutdown()` (also run at exit) stops the process.
    """

    def __init__(
        self,
        log_level: str = "error",
        launch_timeout: float = 300.0,
        *,
        port: int = 30000,
        host: str = "127.0.0.1",
        server_module: str = SERVER_MODULE,
        **server_args: Any,
    ) -> None:
        if not _module_exists(server_module):
            raise BackendUnavailableError(
                "sglr.Runtime starts a local sglr-server, and this sglr build has no server yet "
                f"({server_module} is missing). Start a compatible server yourself and use "
                "sglr.RuntimeEndpoint(url), or sglr.OpenAI(model, base_url=...)."
            )
        self.port = find_free_port(port, host)
        self.url = f"http://{host}:{self.port}"
        argv = [sys.executable, "-m", server_module, "--host", host, "--port", str(self.port)]
        argv += ["--log-level", log_level, *server_args_to_cli(server_args)]
        self.process: subprocess.Popen | None = subprocess.Popen(argv)
        atexit.register(self.shutdown)
        try:
            self._wait_ready(launch_timeout)
            self.endpoint = RuntimeEndpoint(self.url)
        except BaseException:
            self.shutdown()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"Initialization failed: the server exited with code {self.process.returncode}"
                )
            try:
                if httpx.get(self.url + "/health_generate", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError("Server failed to start within the timeout period.")

    def shutdown(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def cache_prefix(self, prefix: str) -> None:
        self.endpoint.cache_prefix(prefix)

    def get_server_info(self) -> dict:
        return self.endpoint.get_server_info()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
