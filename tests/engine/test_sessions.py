"""Sessions (`Engine.open_session`, `session_params`): a continuation's prompt is the previous
request's prompt + output + its own tokens, its greedy output equals that full prompt's, and the
shared prefix is a cache hit (pinned while the session is open); branches, offsets, replace and
every refusal; closing frees the pin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from sglr.engine.engine import Engine
from sglr.engine.session_params import SessionParams
from sglr.engine.sessions import SessionRegistry
from sglr.errors import InvalidRequestError, SessionError, SessionLimitError, UnknownSessionError

GREEDY = {"temperature": 0, "max_new_tokens": 5, "ignore_eos": True}
FIRST, SECOND, OTHER = [5, 6, 7, 8, 9, 10], [20, 21, 22], [30, 31]


@pytest.fixture(scope="module")
def engine(tiny_dir: Path, make_engine) -> Iterator[Engine]:
    eng = make_engine(tiny_dir, max_total_tokens=4096)
    yield eng
    eng.shutdown()


def _turn(engine: Engine, ids: list[int], request_id: str, **session) -> dict:
    return engine.generate(input_ids=ids, sampling_params=GREEDY, rid=request_id, session_params=session)


def _alone(engine: Engine, ids: list[int]) -> list[int]:
    return engine.generate(input_ids=ids, sampling_params=GREEDY)["output_ids"]


def test_a_continuation_reuses_the_session_kv_and_matches_the_full_prompt(engine: Engine) -> None:
    sid = engine.open_session(1000)
    first = _turn(engine, FIRST, "c1", id=sid)
    assert engine.get_stats()["num_locked_kv_slots"] == len(FIRST) + len(first["output_ids"]) - 1
    second = _turn(engine, SECOND, "c2", id=sid, rid="c1")
    full = FIRST + first["output_ids"] + SECOND
    assert second["meta_info"]["prompt_tokens"] == len(full)
    # All but the last output token of c1 have KV: the last one was sampled, never run.
    assert second["meta_info"]["cached_tokens"] == len(FIRST) + len(first["output_ids"]) - 1
    assert second["output_ids"] == _alone(engine, full)
    engine.close_session(sid)
    assert engine.get_stats()["num_locked_kv_slots"] == 0
    engine.check_invariants()


def test_branches_offsets_and_dropped_output(engine: Engine) -> None:
    sid = engine.open_session(1000)
    first = _turn(engine, FIRST, "b1", id=sid)["output_ids"]
    branch = _turn(engine, OTHER, "b2", id=sid, rid="b1")
    assert branch["output_ids"] == _alone(engine, FIRST + first + OTHER)
    cut = _turn(engine, OTHER, "b3", id=sid, rid="b1", offset=4)
    assert cut["meta_info"]["prompt_tokens"] == 4 + len(OTHER)
    assert cut["output_ids"] == _alone(engine, FIRST[:4] + OTHER)
    dropped = _turn(engine, OTHER, "b4", id=sid, rid="b1", drop_previous_output=True)
    assert dropped["output_ids"] == _alone(engine, FIRST + OTHER)
    fresh = _turn(engine, OTHER, "b5", id=sid)  # no rid: its own prompt only
    assert fresh["meta_info"]["prompt_tokens"] == len(OTHER)
    engine.close_session(sid)
    engine.check_invariants()


def test_replace_forgets_the_later_branches(engine: Engine) -> None:
    sid = engine.open_session(1000)
    _turn(engine, FIRST, "r1", id=sid)
    _turn(engine, SECOND, "r2", id=sid, rid="r1")
    _turn(engine, OTHER, "r3", id=sid, rid="r1", replace=True)
    with pytest.raises(SessionError) as info:
        _turn(engine, OTHER, "r4", id=sid, rid="r2")
    assert info.value.param == "session_params.rid"
    _turn(engine, OTHER, "r5", id=sid, rid="r3")  # the replacing branch goes on
    _turn(engine, OTHER, "r6", id=sid, replace=True)  # no rid: the whole history goes
    with pytest.raises(SessionError):
        _turn(engine, OTHER, "r7", id=sid, rid="r1")
    engine.close_session(sid)


def test_refusals_are_typed_and_name_the_field(engine: Engine) -> None:
    with pytest.raises(UnknownSessionError) as info:
        _turn(engine, FIRST, "e1", id="no-such-session")
    assert info.value.param == "session_params.id"
    sid = engine.open_session(8, session_id="small")
    assert sid == "small"
    with pytest.raises(SessionError) as info:
        engine.open_session(8, session_id="small")
    assert info.value.param == "session_id"
    _turn(engine, FIRST, "e2", id=sid)
    with pytest.raises(SessionLimitError) as limit:  # 6 + 5 + 3 tokens > 8
        _turn(engine, SECOND, "e3", id=sid, rid="e2")
    assert limit.value.limit == "capacity_of_str_len"
    with pytest.raises(SessionError) as info:  # a request id the session holds already
        _turn(engine, [1, 2], "e2", id=sid)
    assert info.value.param == "rid"
    with pytest.raises(SessionError):  # n > 1 in a session
        engine.generate(input_ids=FIRST, sampling_params=dict(GREEDY, n=2), session_params={"id": sid})
    engine.close_session(sid)
    with pytest.raises(UnknownSessionError):
        engine.close_session(sid)
    engine.check_invariants()


def test_a_flush_drops_the_pins_and_the_session_goes_on(engine: Engine) -> None:
    sid = engine.open_session(1000)
    first = _turn(engine, FIRST, "f1", id=sid)["output_ids"]
    assert engine.flush_cache() is True
    assert engine.get_stats()["num_locked_kv_slots"] == 0
    second = _turn(engine, SECOND, "f2", id=sid, rid="f1")
    assert second["meta_info"]["cached_tokens"] == 0
    assert second["output_ids"] == _alone(engine, FIRST + first + SECOND)
    engine.close_session(sid)
    engine.check_invariants()


def test_the_registry_bounds_sessions_and_requests() -> None:
    registry = SessionRegistry(abort=lambda rid: None, max_sessions=1, max_session_requests=1)
    registry.open(10, "a")
    with pytest.raises(SessionLimitError) as info:
        registry.open(10)
    assert info.value.limit == "max_sessions"
    with pytest.raises(InvalidRequestError) as bad:
        registry.open(0)
    assert bad.value.param == "capacity_of_str_len"
    registry.close("a")
    registry.open(10, "b")
    prompt = registry.compose(SessionParams("b"), [1, 2], bos_token_id=None)
    registry.record(prompt, "b1", SimpleNamespace(finished=True, output_ids=[3]), 4)
    with pytest.raises(SessionLimitError) as info:
        registry.record(registry.compose(SessionParams("b", "b1"), [4], None), "b2", None, 4)
    assert info.value.limit == "max_session_requests"
    registry.check_invariants()
    registry.close("b")
    assert len(registry) == 0
