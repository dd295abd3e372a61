"""The soak's verdict (`benches/soaklib/report.py`) on made-up outcomes: which failures a killed
worker explains and which count as lost, bad inputs that are accepted, memory growth over the
second half, broken invariants and orphans. (`scripts/test` runs the soak itself.)"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))

from soaklib.faults import FaultWindow
from soaklib.report import RssSample, SoakReport
from soaklib.requests import Call
from soaklib.traffic import Outcome, _judge_body


def _outcome(verdict: str, started: float, ended: float, bad: bool = False) -> Outcome:
    return Outcome("chat", "normal", bad, started, ended, verdict, 200 if verdict == "ok" else 500)


def _report(outcomes, rss=None, invariants=None, orphans=()) -> SoakReport:
    windows = [FaultWindow("SIGKILL a worker of server-tp2", 10.0, 20.0)]
    rss = rss or [RssSample(50.0 + i, {"server-tp1": 1000}) for i in range(10)]
    return SoakReport(
        100.0, outcomes, windows, rss, {}, invariants or {"server-tp1": "ok"}, list(orphans), 0.0
    )


def test_only_failures_of_requests_running_at_the_kill_are_explained() -> None:
    summary = _report(
        [
            _outcome("ok", 1, 2),
            _outcome("failed", 9, 11),
            _outcome("failed", 12, 13),
            _outcome("lost", 30, 31),
        ]
    ).judge()
    assert summary["num_failed_on_killed_worker"] == 1
    assert summary["num_lost"] == 2
    assert len(summary["problems"]) == 2


def test_bad_inputs_must_be_refused() -> None:
    summary = _report([_outcome("refused", 1, 2, bad=True), _outcome("ok", 3, 4, bad=True)]).judge()
    assert summary["num_bad_refused"] == 1 and summary["num_bad_accepted"] == 1
    assert any("bad input accepted" in p for p in summary["problems"])


def test_memory_growth_over_the_second_half_is_a_problem_past_five_percent() -> None:
    growing = [RssSample(50.0 + i, {"server-tp1": 1000 + 10 * i}) for i in range(10)]
    summary = _report([_outcome("ok", 1, 2)], rss=growing).judge()
    assert summary["rss_growth_second_half"] > 0.05
    assert any("resident memory grew" in p for p in summary["problems"])
    assert not _report([_outcome("ok", 1, 2)]).judge()["problems"]


def test_broken_invariants_and_orphans_are_problems() -> None:
    report = _report([_outcome("ok", 1, 2)], invariants={"server-tp1": "3 KV slots still held while idle"},
                     orphans=["server-tp2 child pid 7"])  # fmt: skip
    problems = report.judge()["problems"]
    assert "server-tp1: 3 KV slots still held while idle" in problems
    assert "orphan process: server-tp2 child pid 7" in problems


def test_answers_are_judged_by_their_shape() -> None:
    chat = Call("chat", "/v1/chat/completions")
    assert _judge_body(chat, 200, '{"choices": []}')[0] == "ok"
    assert _judge_body(chat, 200, '{"unexpected": 1}')[0] == "lost"
    assert _judge_body(chat, 400, '{"error": {"message": "max_tokens must be an integer"}}')[0] == "refused"
    assert _judge_body(chat, 502, "<html>bad gateway</html>")[0] == "lost"
    assert _judge_body(chat, 503, '{"error": {"message": "the engine is not running"}}')[0] == "failed"
    native = Call("native", "/generate")
    assert _judge_body(native, 200, '[{"text": "a", "meta_info": {}}]')[0] == "ok"
