"""The control messages between the front and worker rank 0 survive pickling as themselves, and
a step's outputs cost about what a bare tuple of them does."""

from __future__ import annotations

import pickle

import pytest

from sglr.engine.finish import FinishLength
from sglr.engine.kv.tree_summary import PrefixNode, TreeSummary, TreeSummaryLimits
from sglr.engine.token_output import TokenOutput
from sglr.engine.worker import messages


def _round_trip(message: object) -> object:
    return pickle.loads(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


@pytest.mark.parametrize(
    "message",
    [
        messages.AbortRequest("r1"),
        messages.FlushCache(1),
        messages.GetStats(2),
        messages.GetTreeSummary(5, TreeSummaryLimits(max_nodes=3)),
        messages.Reply(6, TreeSummary(2, 9, (PrefixNode(-1, None, 1, 9, 9, 9, 2, 0, 1, (4, 5)),))),
        messages.CheckInvariants(3),
        messages.StopWorkers(),
        messages.Failed("OSError: no model"),
        messages.Heartbeat(41, True),
        messages.Reply(4, {"num_requests": 2}),
        messages.Stopped(),
        messages.Outputs([TokenOutput(7, [1, 2], 2, 0, 0, finish_reason=FinishLength(2))]),
    ],
)
def test_messages_round_trip(message: object) -> None:
    assert _round_trip(message) == message


def test_a_reply_may_carry_an_error() -> None:
    reply = _round_trip(messages.Reply(5, ValueError("unknown")))
    assert isinstance(reply, messages.Reply) and reply.token == 5 and isinstance(reply.value, ValueError)


def test_outputs_pickle_as_their_list() -> None:
    outputs = [TokenOutput(uid, [uid], 1, 0, 0) for uid in range(64)]
    as_message = pickle.dumps(messages.Outputs(outputs), protocol=pickle.HIGHEST_PROTOCOL)
    as_tuple = pickle.dumps(("outputs", outputs), protocol=pickle.HIGHEST_PROTOCOL)
    assert len(as_message) <= len(as_tuple) + 64  # the class's name, not a dict of fields


def test_a_request_keeps_its_priority_across_the_process_boundary() -> None:
    import numpy as np

    from sglr.engine.io import SequenceSpec
    from sglr.engine.request import TokenizedRequest
    from sglr.sampling_params import SamplingParams

    spec = SequenceSpec("r1", None, (1, 2), SamplingParams(max_new_tokens=2), priority=7)
    request = TokenizedRequest(3, spec, np.array([1, 2], dtype=np.int32), 2, frozenset(), 0.5, priority=7)
    sent = _round_trip(messages.AddRequest(request))
    assert isinstance(sent, messages.AddRequest)
    assert sent.request.priority == 7 and sent.request.spec.priority == 7
    assert sent.request.prompt_ids.tolist() == [1, 2]
