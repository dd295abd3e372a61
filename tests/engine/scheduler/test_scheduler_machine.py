"""The scheduler's owners under random request lifecycles, with no model: the real loop's step
(prefill queue, running set, retraction and priority preemption, endings, results) over a small KV pool, a stand-in
executor sampling random tokens. After every operation every owner's invariants hold
(`SchedulerLoop.check_invariants`), and every request ends exactly once."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sglr.engine.batch_executor import ExtendOutcome, SampledToken
from sglr.engine.config import EngineConfig
from sglr.engine.io import SequenceSpec
from sglr.engine.request import TokenizedRequest
from sglr.engine.scheduler.loop import SchedulerLoop
from sglr.engine.scheduler.messages import AbortRequest
from sglr.engine.token_output import TokenOutput
from sglr.sampling_params import SamplingParams

_STOP_TOKEN = 7  # one sampled token in eight ends its request


class _RandomExecutor:
    """Samples a random token (0..7) per sampling row."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def extend(self, items):
        sampled = {item.req.uid: SampledToken(self.rng.randrange(8)) for item in items if item.sample}
        return ExtendOutcome(sampled, {})

    def decode(self, reqs, row_writes=None):
        return [SampledToken(self.rng.randrange(8)) for _ in reqs]

    def decode_forward(self, reqs, input_ids, row_writes=None):
        """The overlap schedule's forward (run on its thread): logits for no one in particular."""
        logits = np.zeros((len(reqs), 8), dtype=np.float32)
        return lambda: SimpleNamespace(next_token_logits=logits)

    def sample_rows(self, reqs, logits, rows):
        return [SampledToken(self.rng.randrange(8)) for _ in reqs]


class _ForcedRuns:
    """Stands in for the constraints' `accept`: now and then a sampled token forces two more
    (a jump-forward run, which the next extend pass computes)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, req, token_id: int) -> list[int]:
        draw = self.rng.random()
        if draw < 0.2:
            return [token_id, 0, 1]
        if draw < 0.3:  # the sampled token retokenized with the forced text: it is not kept
            return [(token_id + 1) % _STOP_TOKEN, 2]
        return [token_id]


class _Sink:
    def __init__(self, ended: dict[int, int]) -> None:
        self.ended = ended

    def push(self, out: TokenOutput) -> None:
        if out.finish_reason is not None:
            self.ended[out.uid] = self.ended.get(out.uid, 0) + 1


def _loop(overlap: bool) -> SchedulerLoop:
    runner = SimpleNamespace(
        num_kv_slots=48,
        runner_config=SimpleNamespace(max_num_reqs=6),
        max_context_len=64,
        vocab_size=8,
        loras=None,  # serves no LoRA adapters
    )
    # Priority scheduling on: random priorities also retract running requests (preemption).
    config = EngineConfig(debug_invariants=True, enable_priority_scheduling=True, overlap_schedule=overlap)
    return SchedulerLoop(config, runner, tokenizer=None, max_running_requests=4, chunked_prefill_size=12)


class SchedulerMachine(RuleBasedStateMachine):
    overlap = False

    def __init__(self) -> None:
        super().__init__()
        self.loop = _loop(self.overlap)
        self.loop._executor = self.loop._decode._executor = _RandomExecutor(0)
        self.loop._constraints.accept = _ForcedRuns(0)
        self.ended: dict[int, int] = {}
        self.num_submitted = 0

    @rule(
        prompt=st.lists(st.integers(0, 2), min_size=1, max_size=30),  # prefixes are shared
        # Up to more than the pool holds with the prompt: such a request ends aborted, also
        # when its prompt was admitted in chunks.
        max_new_tokens=st.integers(0, 60),
        priority=st.sampled_from([0, 0, 5, 50]),  # 50 preempts 0 and 5 (threshold 10)
    )
    def submit(self, prompt: list[int], max_new_tokens: int, priority: int) -> None:
        uid = self.num_submitted
        self.num_submitted += 1
        params = SamplingParams(max_new_tokens=max_new_tokens)
        spec = SequenceSpec(rid=f"r{uid}", text=None, input_ids=tuple(prompt), params=params)
        request = TokenizedRequest(
            uid,
            spec,
            np.array(prompt, dtype=np.int32),
            max_new_tokens,
            frozenset({_STOP_TOKEN}),
            float(uid),
            priority=priority,
        )
        self.loop.submit(request, _Sink(self.ended))
        self.loop._drain_inbox(block=False)

    @precondition(lambda self: self.num_submitted)
    @rule(index=st.integers(0, 1000))
    def abort(self, index: int) -> None:
        self.loop._handle(AbortRequest(f"r{index % self.num_submitted}"))

    @rule()
    def step(self) -> None:
        if self.loop.has_work:
            self.loop._step_isolated()
        self.loop._out.deliver()

    @invariant()
    def owners_agree(self) -> None:
        self.loop.check_invariants()
        assert all(count == 1 for count in self.ended.values()), "a request ended twice"

    def teardown(self) -> None:
        for _ in range(500):  # every request runs to its end
            if not self.loop.has_work:
                break
            self.step()
        self.loop._out.deliver()
        assert not self.loop.has_work and len(self.loop._table) == 0
        assert sorted(self.ended) == list(range(self.num_submitted))
        self.loop._constraints.shutdown()
        self.loop._decode.close()


SchedulerMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
test_scheduler_state_machine = SchedulerMachine.TestCase


class OverlapMachine(SchedulerMachine):
    """The same lifecycles under the overlap schedule: tokens applied one pass late, dropped when
    their request was retracted, preempted or aborted first."""

    overlap = True


OverlapMachine.TestCase.settings = SchedulerMachine.TestCase.settings
test_overlap_scheduler_state_machine = OverlapMachine.TestCase
