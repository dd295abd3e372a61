"""`/load_lora_adapter` and `/unload_lora_adapter` on a running sglr-server: adapters load from
inside `--allowed-lora-path` only (paths elsewhere, symlinks and links out, relative paths and
`..` refused before anything is read), requests in flight keep their adapter through an unload
while new ones are refused, a name loaded again with other weights serves the new weights
(never the old ones' cached KV), and the refusals have their statuses: a bad adapter or a name
taken 400, an unknown unload 404, past `max_loaded_loras` 409. A bad adapter at start stops the
server with a message and exit code 2, leaving no process behind."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import psutil
import pytest
from lora_support import GREEDY, PROMPTS, LoraSet
from server_harness import Served, served_engine

from sglr.engine.config import EngineConfig
from sglr.errors import EngineConfigError
from sglr.server import ServerSettings
from sglr.testing.processes import assert_gone

MAX_LOADED = 3


@pytest.fixture(scope="module")
def served(lora_set: LoraSet) -> Iterator[Served]:
    settings = ServerSettings(allowed_lora_paths=(str(lora_set.root),))
    with served_engine(
        lora_set.base,
        settings,
        debug_invariants=True,
        lora_paths=[f"sql={lora_set.sql}"],
        max_loaded_loras=MAX_LOADED,
    ) as s:
        yield s


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, timeout=120) as c:
        yield c


def load(client: httpx.Client, name: str, path: object) -> httpx.Response:
    return client.post("/load_lora_adapter", json={"lora_name": name, "lora_path": path})


def unload(client: httpx.Client, name: str) -> httpx.Response:
    return client.post("/unload_lora_adapter", json={"lora_name": name})


def refused(response: httpx.Response, status: int, param: str | None, words: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and words in error["message"], error
    assert "Traceback" not in response.text


def read_tokens(lines: Iterator[str], tokens: list[int], at_least: int) -> dict:
    """Reads events (each the whole output so far) until `tokens` holds `at_least` ids or the
    stream ends; returns the last event."""
    event: dict = {}
    while len(tokens) < at_least:
        line = next(lines, None)
        if line is None or line == "data: [DONE]":
            break
        if line.startswith("data: "):
            event = json.loads(line[len("data: ") :])
            tokens[:] = event["output_ids"]
    return event


@pytest.mark.tp2
def test_unload_under_load_keeps_running_requests_and_refuses_new_ones(
    served: Served, client: httpx.Client, lora_set: LoraSet
) -> None:
    assert load(client, "late", str(lora_set.late)).json()["loaded_adapters"] == {
        "sql": str(lora_set.sql),
        "late": str(lora_set.late),
    }
    params = {**GREEDY, "max_new_tokens": 3500}  # far from done while the test runs
    with httpx.Client(base_url=served.url, timeout=120) as streams:
        opened, outputs = [], []
        for k, prompt in enumerate(PROMPTS):
            body = {
                "input_ids": prompt,
                "sampling_params": params,
                "lora_path": "late",
                "stream": True,
                "rid": f"late-{k}",
            }
            response = streams.send(streams.build_request("POST", "/generate", json=body), stream=True)
            assert response.status_code == 200
            opened.append((response, response.iter_lines()))
            outputs.append([])
            read_tokens(opened[-1][1], outputs[-1], 1)  # running
        assert unload(client, "late").json()["loaded_adapters"] == {"sql": str(lora_set.sql)}
        at_unload = [len(tokens) for tokens in outputs]
        refused(
            client.post("/generate", json={"input_ids": PROMPTS[0], "lora_path": "late"}),
            400,
            "lora_path",
            "'late' is not loaded",
        )
        for (_, lines), tokens in zip(opened, outputs, strict=True):
            read_tokens(lines, tokens, 40)
        for k in range(len(PROMPTS)):
            assert client.post("/abort_request", json={"rid": f"late-{k}"}).status_code == 200
        for (response, lines), tokens, before in zip(opened, outputs, at_unload, strict=True):
            last = read_tokens(lines, tokens, 10**9)
            response.close()
            assert last["meta_info"]["finish_reason"]["type"] == "abort"
            assert len(tokens) >= 40 and len(tokens) > before  # it kept going after the unload
    for prompt, tokens in zip(PROMPTS, outputs, strict=True):
        assert tokens[:40] == lora_set.expected(lora_set.late, prompt, 40)
    served.assert_no_leaks()


@pytest.mark.tp2
def test_a_name_loaded_again_serves_the_new_weights(
    served: Served, client: httpx.Client, lora_set: LoraSet
) -> None:
    prompt = PROMPTS[1]
    body = {"input_ids": prompt, "sampling_params": GREEDY, "lora_path": "again"}
    try:
        assert load(client, "again", str(lora_set.late)).status_code == 200
        first = client.post("/generate", json=body).json()
        assert first["output_ids"] == lora_set.expected(lora_set.late, prompt)
        assert unload(client, "again").status_code == 200
        assert load(client, "again", str(lora_set.late_v2)).status_code == 200
        second = client.post("/generate", json=body).json()
        assert second["output_ids"] == lora_set.expected(lora_set.late_v2, prompt)
        assert second["meta_info"]["cached_tokens"] == 0  # nothing of the old weights' KV
    finally:
        unload(client, "again")
    served.assert_no_leaks()


def test_paths_outside_the_allowed_root_are_refused_before_reading(
    client: httpx.Client, lora_set: LoraSet
) -> None:
    root = lora_set.root
    refused(load(client, "x", str(lora_set.sql)), 400, "lora_path", "lies outside the directories")
    refused(load(client, "x", str(lora_set.escape)), 400, "lora_path", "a symlink in it leads outside")
    refused(
        load(client, "x", str(lora_set.hidden_link)),
        400,
        "lora_path",
        "'adapter_model.safetensors' in it leads outside",
    )
    refused(load(client, "x", f"{root}/../operator/sql"), 400, "lora_path", "'..' component")
    refused(load(client, "x", "late"), 400, "lora_path", "must be absolute")
    refused(load(client, "x", f"{root}/late\x00"), 400, "lora_path", "NUL byte")
    refused(load(client, "x", str(root / "missing")), 400, "lora_path", "not an existing directory")
    refused(load(client, "x", 5), 400, "lora_path", "must be a string")
    assert adapter_names(client) == ["sql"]


def test_bad_requests_and_adapters_have_their_statuses(client: httpx.Client, lora_set: LoraSet) -> None:
    refused(load(client, "x", str(lora_set.broken)), 400, None, "no adapter_config.json")
    refused(load(client, "sql", str(lora_set.late)), 400, None, "'sql' is already loaded")
    refused(
        client.post("/load_lora_adapter", json={"lora_path": str(lora_set.late)}),
        400,
        "lora_name",
        "required",
    )
    refused(client.post("/load_lora_adapter", json={"lora_name": "x"}), 400, "lora_path", "required")
    refused(
        client.post(
            "/load_lora_adapter", json={"lora_name": "x", "lora_path": str(lora_set.late), "path": 1}
        ),
        400,
        "path",
        "unknown field",
    )
    refused(unload(client, "nope"), 404, "lora_name", "'nope' is not loaded")
    refused(client.post("/unload_lora_adapter", json={}), 400, "lora_name", "required")
    assert adapter_names(client) == ["sql"]


def adapter_names(client: httpx.Client) -> list[str]:
    return [card["id"] for card in client.get("/v1/models").json()["data"][1:]]


def test_loads_past_max_loaded_loras_are_a_409(client: httpx.Client, lora_set: LoraSet) -> None:
    names = [f"cap{k}" for k in range(MAX_LOADED - 1)]
    try:
        for name in names:
            assert load(client, name, str(lora_set.late)).status_code == 200
        too_many = load(client, "one-too-many", str(lora_set.late))
        refused(too_many, 409, None, "max_loaded_loras")
        assert too_many.json()["error"]["type"] == "conflict_error"
    finally:
        for name in names:
            unload(client, name)
    assert load(client, "after", str(lora_set.late)).status_code == 200  # room again
    assert unload(client, "after").status_code == 200


def test_a_server_without_an_allowed_root_loads_nothing_at_run_time(lora_set: LoraSet) -> None:
    with (
        served_engine(lora_set.base, ServerSettings(), enable_lora=True) as served,
        httpx.Client(base_url=served.url, timeout=60) as client,
    ):
        refused(load(client, "late", str(lora_set.late)), 400, "lora_path", "--allowed-lora-path")
        assert adapter_names(client) == []


def test_a_bad_adapter_at_start_stops_the_server_with_a_message(lora_set: LoraSet) -> None:
    argv = [sys.executable, "-m", "sglr", "--model-path", str(lora_set.base), "--port", "0", "--device", "cpu",
            "--max-total-tokens", "4096", "--lora-paths", f"sql={lora_set.sql}", f"bad={lora_set.broken}"]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[int, psutil.Process] = {}
    while process.poll() is None:  # the workers it starts, to check none outlives it
        try:
            seen.update({child.pid: child for child in psutil.Process(process.pid).children(recursive=True)})
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 2, out + err
    assert f"no adapter_config.json in {lora_set.broken}" in err
    assert "Traceback" not in out + err
    assert_gone(list(seen.values()))


def test_the_lora_flags_are_sglangs_and_reach_the_engine_options() -> None:
    from sglr.server.launch import build_parser, engine_options

    args = build_parser().parse_args(
        ["--lora-paths", "a=/x/a", "/x/b", '{"lora_name": "c", "lora_path": "/x/c", "pinned": true}',
         "--max-loras-per-batch", "2", "--max-loaded-loras", "4", "--max-lora-rank", "16",
         "--lora-target-modules", "q_proj", "v_proj", "--allowed-lora-path", "/tmp", "--allowed-lora-path", "/srv"]
    )  # fmt: skip
    options = engine_options(args)
    assert options["lora_paths"] == ("a=/x/a", "/x/b", "c=/x/c")
    assert (options["max_loras_per_batch"], options["max_loaded_loras"], options["max_lora_rank"]) == (
        2,
        4,
        16,
    )
    assert options["lora_target_modules"] == ("q_proj", "v_proj") and options["enable_lora"] is None
    assert args.allowed_lora_paths == ["/tmp", "/srv"]
    everything = engine_options(build_parser().parse_args(["--enable-lora", "--lora-target-modules", "all"]))
    assert everything["enable_lora"] is True and everything["lora_target_modules"] == ("all",)
    # EngineConfig reads "all" (any projection) in one place, for the flag and the keyword alike.
    assert EngineConfig(model_path="m", lora_target_modules=("all",)).lora_target_modules is None
    assert EngineConfig(model_path="m", lora_target_modules="q_proj").lora_target_modules == ("q_proj",)
    with pytest.raises(EngineConfigError, match="'all' stands alone"):
        EngineConfig(model_path="m", lora_target_modules=("all", "q_proj"))
    assert everything["lora_paths"] is None and everything["max_loras_per_batch"] == 8
