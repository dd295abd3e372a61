"""The engine with its scheduler and model in a worker process (`multiprocess=True`): the same
results as in process, the same API, and no hang or orphan process on any failure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from sglr.engine.engine import Engine
from sglr.errors import EngineClosedError, InvalidRequestError

GREEDY = {"temperature": 0, "max_new_tokens": 10, "ignore_eos": True}
PROMPTS = ["The quick brown fox jumps over", "def main():\n    return", "Once upon a time"]


@pytest.fixture(scope="module")
def workers(tiny_dir: Path, make_engine):
    engine = make_engine(tiny_dir, multiprocess=True)
    yield engine
    engine.shutdown()


def test_results_equal_the_in_process_engine(workers: Engine, engine: Engine) -> None:
    params = [GREEDY, dict(GREEDY, stop=["e"]), {"temperature": 0, "max_new_tokens": 6, "regex": "[0-9]{3}"}]
    for sampling in params:
        inline = engine.generate(PROMPTS, sampling)
        remote = workers.generate(PROMPTS, sampling)
        assert [r["output_ids"] for r in remote] == [r["output_ids"] for r in inline]
        assert [r["text"] for r in remote] == [r["text"] for r in inline]
        assert [r["meta_info"]["finish_reason"] for r in remote] == [
            r["meta_info"]["finish_reason"] for r in inline
        ]
    assert re.fullmatch("[0-9]{3}", workers.generate(PROMPTS[0], params[2])["text"])
    workers.check_invariants()


def test_logprobs_and_streaming_equal_the_in_process_engine(workers: Engine, engine: Engine) -> None:
    kwargs = {"return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": 2}
    inline = engine.generate(PROMPTS[1], GREEDY, **kwargs)["meta_info"]
    remote = workers.generate(PROMPTS[1], GREEDY, **kwargs)["meta_info"]
    for key in ("input_token_logprobs", "output_token_logprobs", "output_top_logprobs"):
        assert [entry[1] for entry in _flat(remote[key])] == [entry[1] for entry in _flat(inline[key])]
        for ours, theirs in zip(_flat(remote[key]), _flat(inline[key]), strict=True):
            assert (ours[0] is None) == (theirs[0] is None)
            if ours[0] is not None:
                assert abs(ours[0] - theirs[0]) < 1e-5
    chunks = list(workers.generate(PROMPTS[0], GREEDY, stream=True))
    assert "".join(c["text"] for c in chunks) == engine.generate(PROMPTS[0], GREEDY)["text"]
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"


def _flat(entries: list) -> list:
    return [e for entry in entries for e in (entry if entry and isinstance(entry[0], list) else [entry])]


def test_async_api_and_abort_work_across_processes(workers: Engine) -> None:
    async def run() -> tuple[dict, dict]:
        long = asyncio.ensure_future(
            workers.async_generate(PROMPTS[0], {"max_new_tokens": 4000, "ignore_eos": True}, rid="long-1")
        )
        short = await workers.async_generate(PROMPTS[1], GREEDY)
        await asyncio.sleep(0.05)
        workers.abort("long-1")
        return short, await long

    short, long = asyncio.run(run())
    assert short["meta_info"]["completion_tokens"] == 10
    assert long["meta_info"]["finish_reason"]["type"] == "abort"
    assert long["meta_info"]["completion_tokens"] < 4000
    stats = workers.get_stats()
    assert (
        stats["num_aborted"] >= 1
        and stats["num_free_kv_slots"] + stats["num_cached_kv_slots"] == stats["num_kv_slots"]
    )
    assert workers.flush_cache() is True
    workers.check_invariants()


def test_bad_input_is_rejected_in_the_callers_process(workers: Engine) -> None:
    with pytest.raises(InvalidRequestError):
        workers.generate(PROMPTS[0], {"max_new_tokens": -1})
    result = workers.generate(PROMPTS[0], {"max_new_tokens": 4, "regex": "(unclosed"})
    assert isinstance(result["meta_info"]["finish_reason"].error, InvalidRequestError)


def test_a_worker_that_dies_ends_every_request_with_an_error(tiny_dir: Path, make_engine) -> None:
    engine = make_engine(tiny_dir, multiprocess=True)
    try:
        results: list = []

        def generate() -> None:
            try:
                results.append(engine.generate(PROMPTS, {"max_new_tokens": 3000, "ignore_eos": True}))
            except Exception as exc:
                results.append(exc)

        caller = threading.Thread(target=generate)
        caller.start()
        time.sleep(0.5)
        os.kill(engine.worker_pids[0], signal.SIGKILL)
        caller.join(timeout=30)
        assert not caller.is_alive(), "a request hung after its worker died"
        (outcome,) = results
        reasons = [r["meta_info"]["finish_reason"] for r in outcome]
        assert all(r["type"] == "abort" and isinstance(r.error, EngineClosedError) for r in reasons)
        assert "died" in reasons[0]["message"]
        assert not engine.is_alive
        with pytest.raises(EngineClosedError):
            engine.generate(PROMPTS[0], GREEDY)
    finally:
        engine.shutdown()


def test_shutdown_leaves_no_process(tiny_dir: Path, make_engine) -> None:
    engine = make_engine(tiny_dir, multiprocess=True)
    pids = engine.worker_pids
    assert engine.generate(PROMPTS[0], GREEDY)["meta_info"]["completion_tokens"] == 10
    engine.shutdown()
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def test_no_orphan_when_the_parent_is_killed(tiny_dir: Path) -> None:
    script = textwrap.dedent(
        f"""
        from sglr.engine.engine import Engine
        engine = Engine(model_path={str(tiny_dir)!r}, device="cpu", max_total_tokens=4096, multiprocess=True)
        print(" ".join(map(str, engine.worker_pids)), flush=True)
        import time
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()
        pids = [int(pid) for pid in line.split()]
        assert pids, "the engine did not start"
        parent.kill()  # SIGKILL: no cleanup code runs in the parent
        parent.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_running(pid) for pid in pids):
            time.sleep(0.1)
        assert not [pid for pid in pids if _running(pid)], "worker processes outlived their parent"
    finally:
        parent.kill()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_worker_that_hangs_is_detected_and_ends_every_request(tiny_dir: Path, make_engine) -> None:
    engine = make_engine(tiny_dir, multiprocess=True, watchdog_timeout_s=3.0)
    pid = engine.worker_pids[0]
    outcome: list = []

    def generate() -> None:
        outcome.append(engine.generate(PROMPTS, {"max_new_tokens": 3000, "ignore_eos": True}))

    caller = threading.Thread(target=generate)
    try:
        caller.start()
        time.sleep(0.5)
        os.kill(pid, signal.SIGSTOP)  # hung: alive, but neither stepping nor answering
        caller.join(timeout=30)
        assert not caller.is_alive(), "requests hung with their worker"
        reasons = [r["meta_info"]["finish_reason"] for r in outcome[0]]
        assert all(isinstance(r.error, EngineClosedError) and "hung" in r["message"] for r in reasons), (
            reasons
        )
        assert not engine.is_alive
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        engine.shutdown()
    assert not _running(pid)


def test_sessions_work_across_processes(workers: Engine, engine: Engine) -> None:
    # The pins live in the worker (OpenSession / CloseSession): the continuation is a cache hit there.
    sid = workers.open_session(1000)
    first = workers.generate(
        input_ids=[5, 6, 7, 8], sampling_params=GREEDY, rid="w1", session_params={"id": sid}
    )
    second = workers.generate(
        input_ids=[9, 10], sampling_params=GREEDY, rid="w2", session_params={"id": sid, "rid": "w1"}
    )
    full = [5, 6, 7, 8] + first["output_ids"] + [9, 10]
    assert second["output_ids"] == engine.generate(input_ids=full, sampling_params=GREEDY)["output_ids"]
    assert second["meta_info"]["cached_tokens"] == 4 + len(first["output_ids"]) - 1
    assert workers.get_stats()["num_open_sessions"] == 1
    workers.close_session(sid)
    assert workers.get_stats()["num_locked_kv_slots"] == 0
    workers.check_invariants()


def test_the_tree_summary_comes_from_the_worker_that_owns_the_tree(workers: Engine) -> None:
    from sglr.engine.kv.tree_summary import TreeSummaryLimits

    shared = "A prefix only this test sends, long enough to span several tokens. "
    workers.generate([shared + tail for tail in ("one", "two", "three")], {"max_new_tokens": 1})
    summary = workers.get_tree_summary(TreeSummaryLimits(max_nodes=512, max_head_tokens=256))
    assert summary.num_cached_tokens == workers.get_stats()["num_cached_kv_slots"]
    texts = {workers.tokenizer.decode(list(n.head_token_ids)): n for n in summary.nodes if n.num_hits >= 3}
    assert any(text.strip() and text.strip() in shared for text in texts), texts
