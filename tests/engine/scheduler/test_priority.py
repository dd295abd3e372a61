"""Priority scheduling on the tiny model, stepped by hand: a loop on the engine's runner that the
test steps itself, so which request goes first depends on the scheduler alone, never on timing.
Admission order is read from the order of the requests' first outputs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sglr.engine.config import EngineConfig
from sglr.engine.engine import Engine
from sglr.engine.io import SequenceSpec
from sglr.engine.scheduler.loop import SchedulerLoop
from sglr.engine.token_output import TokenOutput
from sglr.errors import InvalidRequestError
from sglr.sampling_params import SamplingParams

_PROMPTS = {"blocker": [11, 12, 13, 14, 15, 16], "low": [21, 22, 23, 24], "high": [31, 32, 33]}


@pytest.fixture(scope="module")
def engine(tiny_dir) -> Iterator[Engine]:
    eng = Engine(
        model_path=str(tiny_dir), device="cpu", max_total_tokens=1024, enable_priority_scheduling=True
    )
    eng._scheduler.stop()  # the tests step their own loops on its runner (one KV pool at a time)
    yield eng
    eng.shutdown()


class _Run:
    """A hand-stepped loop; `outputs[rid]` are its requests' outputs, `first_seen` the order in
    which they produced their first, `finished` the order in which they ended."""

    def __init__(self, engine: Engine, max_running_requests: int = 1, **options) -> None:
        config = EngineConfig(**{"debug_invariants": True, "enable_priority_scheduling": True, **options})
        self.loop = SchedulerLoop(config, engine.runner, engine.tokenizer, max_running_requests, 256)
        self.builder = engine._builder
        self.outputs: dict[str, list[TokenOutput]] = {}
        self.first_seen: list[str] = []
        self.finished: list[str] = []
        self._rids: dict[int, str] = {}

    def submit(self, rid: str, max_new_tokens: int, priority: int | None = None) -> None:
        params = SamplingParams(temperature=0, max_new_tokens=max_new_tokens, ignore_eos=True)
        spec = SequenceSpec(rid, None, tuple(_PROMPTS[rid]), params, priority=priority)
        request, _ = self.builder.build(spec)
        self._rids[request.uid] = rid
        self.outputs[rid] = []
        self.loop.submit(request, self)
        self.loop._drain_inbox(block=False)

    def push(self, out: TokenOutput) -> None:  # the requests' sink
        rid = self._rids[out.uid]
        if not self.outputs[rid]:
            self.first_seen.append(rid)
        self.outputs[rid].append(out)
        if out.finish_reason is not None:
            self.finished.append(rid)

    def step(self, num_steps: int = 1) -> None:
        for _ in range(num_steps):
            self.loop._step_isolated()
            self.loop._out.deliver()
            self.loop.check_invariants()

    def finish(self) -> None:
        for _ in range(200):
            if not self.loop.has_work:
                break
            self.step()
        assert not self.loop.has_work
        self.loop.check_invariants()
        self.loop._constraints.shutdown()

    def output_ids(self, rid: str) -> list[int]:
        return [token for out in self.outputs[rid] for token in out.new_token_ids]

    def last(self, rid: str) -> TokenOutput:
        return self.outputs[rid][-1]


def _alone(engine: Engine, rid: str, max_new_tokens: int) -> list[int]:
    run = _Run(engine)
    run.submit(rid, max_new_tokens)
    run.finish()
    return run.output_ids(rid)


def _saturated(engine: Engine, priorities: dict[str, int], **options) -> _Run:
    """One running place taken by `blocker` (priority 0); then low, then high arrive."""
    run = _Run(engine, **options)
    run.submit("blocker", 3, priority=0)
    run.step(2)
    run.submit("low", 2, priority=priorities["low"])
    run.submit("high", 2, priority=priorities["high"])
    run.finish()
    return run


def test_higher_priority_is_admitted_first_when_the_engine_is_full(engine: Engine) -> None:
    # Within the threshold of the blocker (10): nothing is preempted, the order alone changes.
    run = _saturated(engine, {"low": 1, "high": 5})
    assert run.first_seen == ["blocker", "high", "low"]
    assert run.loop.get_stats()["num_preemptions"] == 0


def test_low_values_first_reverses_the_order(engine: Engine) -> None:
    run = _saturated(engine, {"low": 5, "high": 1}, schedule_low_priority_values_first=True)
    assert run.first_seen == ["blocker", "high", "low"]


def test_arrival_order_without_priority_scheduling(engine: Engine) -> None:
    run = _saturated(engine, {"low": 1, "high": 5}, enable_priority_scheduling=False)
    assert run.first_seen == ["blocker", "low", "high"]


def test_preemption_retracts_the_low_request_and_both_match_their_greedy_outputs(engine: Engine) -> None:
    expected_low = _alone(engine, "low", 10)
    expected_high = _alone(engine, "high", 4)
    run = _Run(engine)
    run.submit("low", 10, priority=0)
    run.step(3)  # low is decoding, the one running place taken
    run.submit("high", 4, priority=100)
    run.finish()
    low, high = run.last("low"), run.last("high")
    assert low.num_retractions == 1 and high.num_retractions == 0
    assert run.loop.get_stats()["num_preemptions"] == 1
    assert run.finished == ["high", "low"]  # high ran while low waited
    assert run.output_ids("low") == expected_low and run.output_ids("high") == expected_high
    # low resumed from its cached KV: its prompt was computed once.
    prompt_lens = len(_PROMPTS["low"]) + len(_PROMPTS["high"])
    assert run.loop.get_stats()["num_extend_tokens"] < prompt_lens + len(_PROMPTS["low"])


def test_no_preemption_within_the_threshold(engine: Engine) -> None:
    run = _Run(engine)
    run.submit("low", 6, priority=0)
    run.step(3)
    run.submit("high", 2, priority=10)  # beats low by 10: not more than the threshold
    run.finish()
    assert run.last("low").num_retractions == 0
    assert run.first_seen == ["low", "high"]


def test_priority_refused_when_disabled_with_abort_on_priority(engine: Engine) -> None:
    from sglr.engine.priority import PriorityPolicy

    policy = PriorityPolicy(enabled=False, abort_when_disabled=True)
    assert policy.resolve(None) == 0
    with pytest.raises(InvalidRequestError) as info:
        policy.resolve(3)
    assert info.value.param == "priority"
    assert PriorityPolicy(enabled=False).resolve(3) == 0  # accepted, ignored
    with pytest.raises(InvalidRequestError):
        PriorityPolicy(enabled=True).resolve("high")  # type: ignore[arg-type]
