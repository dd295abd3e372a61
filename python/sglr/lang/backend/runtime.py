"""`Runtime(...)`: starts a local sglr-server in a child process and talks to it as a backend.

    runtime = sgl.Runtime(model_path="path/or/model.gguf", port=30000)   # None: the embedded SmolLM2
    sgl.set_default_backend(runtime)       # programs run through `runtime.endpoint`
    runtime.shutdown()                     # also runs at exit

Keyword arguments become the server's flags (`max_total_tokens=4096` -> `--max-total-tokens
4096`, `disable_radix_cache=True` -> `--disable-radix-cache`). The server is `python -m sglr`
(`sglr-server`); it listens on the first free port at or above `port`, and `Runtime` returns
once `/health_generate` answers.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from sglr.errors import BackendUnavailableError
from sglr.lang.backend.native_stream import StreamDecoder
from sglr.lang.backend.runtime_endpoint import RuntimeEndpoint

SERVER_MODULE = "sglr"  # `python -m sglr` is sglr-server
_SERVER_LAUNCHER = "sglr.server.launch"


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

    `server_module` runs as `python -m <module>` with `--host`, `--port`, `--log-level` and the
    flags from `server_args` (tests substitute a stand-in server).
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
        launcher = _SERVER_LAUNCHER if server_module == SERVER_MODULE else server_module
        if not _module_exists(launcher):
            raise BackendUnavailableError(
                f"sglr.Runtime starts a local server with `python -m {server_module}`, and {launcher} "
                "is missing. Start a compatible server yourself and use sglr.RuntimeEndpoint(url), "
                "or run programs in process with sglr.Engine()."
            )
        self.process: subprocess.Popen | None = None
        self.port = find_free_port(port, host)
        self.url = f"http://{host}:{self.port}"
        self.api_key = server_args.get("api_key")
        argv = [sys.executable, "-m", server_module, "--host", host, "--port", str(self.port)]
        argv += ["--log-level", log_level, *server_args_to_cli(server_args)]
        self.process = subprocess.Popen(argv)
        atexit.register(self.shutdown)
        try:
            self._wait_ready(launch_timeout)
            self.endpoint = RuntimeEndpoint(self.url, api_key=self.api_key)
        except BaseException:
            self.shutdown()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"Initialization failed: the server exited with code {self.process.returncode} "
                    "(its error is printed above)"
                )
            try:
                response = httpx.get(self.url + "/health_generate", headers=headers, timeout=5)
                if response.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError("Server failed to start within the timeout period.")

    def shutdown(self) -> None:
        """Stops the server (SIGTERM: it drains running requests, then exits)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    # --- helpers, as on SGLang's Runtime ---------------------------------------------------------
    def cache_prefix(self, prefix: str) -> None:
        self.endpoint.cache_prefix(prefix)

    def get_server_info(self) -> dict:
        return self.endpoint.get_server_info()

    def flush_cache(self) -> bool:
        return self.endpoint.flush_cache()

    def generate(
        self,
        prompt: str | list[str],
        sampling_params: dict[str, Any] | None = None,
        return_logprob: bool = False,
        logprob_start_len: int | None = None,
        top_logprobs_num: int | None = None,
    ) -> str:
        """One native `/generate` call; returns the response as a JSON string (as SGLang does)."""
        body: dict[str, Any] = {"text": prompt, "sampling_params": sampling_params or {}}
        if return_logprob:
            body.update(
                return_logprob=True, logprob_start_len=logprob_start_len, top_logprobs_num=top_logprobs_num
            )
        return json.dumps(self.endpoint._post(body))

    async def async_generate(
        self, prompt: str, sampling_params: dict[str, Any] | None = None
    ) -> AsyncIterator[str]:
        """Streams one generation; yields the text as it grows, piece by piece."""
        body = {"text": prompt, "sampling_params": sampling_params or {}, "stream": True}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        decoder = StreamDecoder()
        async with (
            httpx.AsyncClient(timeout=None, headers=headers) as client,
            client.stream("POST", self.url + "/generate", json=body) as response,
        ):
            response.raise_for_status()
            async for line in response.aiter_lines():
                piece = decoder.feed_line(line)
                if decoder.done:
                    break
                if piece is not None and piece[0]:
                    yield piece[0]

    add_request = async_generate

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
