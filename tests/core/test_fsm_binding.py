"""The `sglr._core` constraint surface: Vocabulary, TokenFsm, fill_bitmasks, typed errors."""

from __future__ import annotations

import json
import re
import threading

import numpy as np
import pytest

from sglr import errors
from sglr._core import TokenFsm, Vocabulary, fill_bitmasks, json_schema_to_regex


def char_vocab(extra: tuple[bytes, ...] = ()) -> Vocabulary:
    """Single printable ASCII characters, a few multi-character tokens, then EOS (special)."""
    tokens: list[bytes | None] = [bytes([b]) for b in range(32, 127)]
    tokens += list(extra)
    tokens.append(None)
    return Vocabulary(tokens, [len(tokens) - 1])


def allowed(fsm: TokenFsm, state: int) -> set[int]:
    return set(fsm.allowed_token_ids(state).tolist())


def test_vocabulary_accepts_bytes_str_and_none() -> None:
    vocab = Vocabulary([b"\xff", "\u0120hi", None, "x"], [2], encoding="byte_level")
    assert vocab.vocab_size == 4 and len(vocab) == 4 and vocab.num_mask_words == 1
    assert vocab.token_bytes(0) == b"\xff"
    assert vocab.token_bytes(1) == b" hi"
    assert vocab.token_bytes(2) is None
    assert vocab.eos_token_ids == [2]
    sp = Vocabulary(["\u2581the", "<0x0A>"], [], encoding="sentencepiece")
    assert sp.token_bytes(0) == b" the" and sp.token_bytes(1) == b"\n"
    assert Vocabulary([b"a"], []).fingerprint == Vocabulary([b"a"], []).fingerprint
    assert Vocabulary([b"a"], []).fingerprint != Vocabulary([b"b"], []).fingerprint


@pytest.mark.parametrize(
    ("tokens", "eos", "kwargs", "error"),
    [
        ([b"a"], [5], {}, errors.VocabularyError),
        (["\u4e2d"], [], {"encoding": "byte_level"}, errors.VocabularyError),
        ([b"a"], [], {"encoding": "latin1"}, errors.VocabularyError),
        ([1.5], [], {}, TypeError),
    ],
)
def test_bad_vocabularies_raise_typed_errors(tokens, eos, kwargs, error) -> None:
    with pytest.raises(error):
        Vocabulary(tokens, eos, **kwargs)


def test_regex_masks_advance_and_eos() -> None:
    vocab = char_vocab((b"12", b"3."))
    eos = vocab.vocab_size - 1
    fsm = TokenFsm.from_regex(r"[0-9]+(\.[0-9]+)?", vocab)
    assert fsm.pattern == r"[0-9]+(\.[0-9]+)?"
    start = fsm.start_state
    digits = {ord(c) - 32 for c in "0123456789"}
    assert allowed(fsm, start) == digits | {95, 96}
    state = fsm.advance(start, 95)  # "12"
    assert fsm.is_accepting(state)
    assert eos in allowed(fsm, state)
    state = fsm.advance(state, 96)  # "3."
    assert not fsm.is_accepting(state) and eos not in allowed(fsm, state)
    assert fsm.try_advance(state, ord(".") - 32) is None
    with pytest.raises(errors.TokenNotAllowedError):
        fsm.advance(state, eos)
    end = fsm.advance(fsm.advance(state, ord("5") - 32), eos)
    assert fsm.is_terminal(end) and end == fsm.terminal_state
    assert allowed(fsm, end) == {eos}
    assert fsm.advance_many(start, [95, 96, ord("7") - 32]) == fsm.advance(
        fsm.advance(fsm.advance(start, 95), 96), ord("7") - 32
    )
    fsm.check_invariants()


def test_fill_bitmask_writes_caller_memory() -> None:
    vocab = char_vocab()
    fsm = TokenFsm.from_regex("ab", vocab)
    out = np.full(fsm.num_mask_words + 2, -1, dtype=np.int32)
    fsm.fill_bitmask(fsm.start_state, out)
    bits = np.unpackbits(out.view(np.uint8), bitorder="little")
    assert np.flatnonzero(bits).tolist() == [ord("a") - 32]
    assert out[-2:].tolist() == [0, 0]
    with pytest.raises(errors.BitmaskShapeError):
        fsm.fill_bitmask(fsm.start_state, np.zeros(1, dtype=np.int32))
    with pytest.raises(TypeError):
        fsm.fill_bitmask(fsm.start_state, np.zeros(8, dtype=np.int64))
    with pytest.raises(ValueError, match="contiguous"):
        fsm.fill_bitmask(fsm.start_state, np.zeros(16, dtype=np.int32)[::2])
    with pytest.raises(errors.UnknownStateError):
        fsm.fill_bitmask(10_000, out)


def test_batched_fill_with_row_indices_and_checks_before_writing() -> None:
    vocab = char_vocab()
    digits = TokenFsm.from_regex("[0-9]+", vocab)
    letters = TokenFsm.from_regex("[a-z]+", vocab)
    out = np.full((4, digits.num_mask_words), 7, dtype=np.int32)
    fill_bitmasks([digits, letters], np.array([0, 0], dtype=np.int32), out, rows=[3, 1])
    single = np.zeros(digits.num_mask_words, dtype=np.int32)
    digits.fill_bitmask(0, single)
    assert out[3].tolist() == single.tolist()
    letters.fill_bitmask(0, single)
    assert out[1].tolist() == single.tolist()
    assert out[0].tolist() == [7] * digits.num_mask_words  # rows not named stay untouched
    before = out.copy()
    with pytest.raises(errors.UnknownStateError):
        fill_bitmasks([digits, letters], [0, 999], out)
    with pytest.raises(ValueError, match="out of range"):
        fill_bitmasks([digits], [0], out, rows=[4])
    other = TokenFsm.from_regex("x", Vocabulary([b"x"], []))
    with pytest.raises(errors.VocabularyError):
        fill_bitmasks([digits, other], [0, 0], out)
    with pytest.raises(TypeError):
        fill_bitmasks(["not an fsm"], [0], out)
    assert (out == before).all()


def test_jump_forward_returns_forced_bytes_and_state() -> None:
    vocab = char_vocab()
    fsm = TokenFsm.from_regex(r'\{"name": "[a-z]+", "ok": (true|false)\}', vocab)
    forced, state = fsm.jump_forward(fsm.start_state)
    assert forced == b'{"name": "'
    assert fsm.advance_bytes(fsm.start_state, forced) == state
    state = fsm.advance(state, ord("x") - 32)
    assert fsm.jump_forward(state) == (b"", state)
    state = fsm.advance(state, ord('"') - 32)
    forced, after = fsm.jump_forward(state)
    assert forced == b', "ok": '
    assert fsm.advance_bytes(state, forced) == after
    assert fsm.advance_bytes(fsm.start_state, b"nope") is None


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        ("(ab", errors.InvalidRegexError),
        (r"\bword\b", errors.UnsupportedRegexError),
        (r"(?=x)y", errors.InvalidRegexError),
        (r"\w{100000}", errors.ConstraintTooLargeError),
        (r"[^\s\S]", errors.EmptyConstraintError),
    ],
)
def test_bad_patterns_raise_typed_errors(pattern: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        TokenFsm.from_regex(pattern, char_vocab())
    assert issubclass(error, errors.ConstraintError) and issubclass(error, ValueError)


def test_json_schema_compiles_and_names_unsupported_keywords() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    regex = json_schema_to_regex(json.dumps(schema))
    assert re.fullmatch(regex, '{"n": 12}') and not re.fullmatch(regex, '{"n": "12"}')
    compact = json_schema_to_regex(json.dumps(schema), whitespace_pattern="")
    assert re.fullmatch(compact, '{"n":1}') and not re.fullmatch(compact, '{"n": 1}')
    fsm = TokenFsm.from_json_schema(json.dumps(schema), char_vocab())
    assert fsm.pattern == regex
    with pytest.raises(errors.UnsupportedSchemaError) as caught:
        json_schema_to_regex(json.dumps({"type": "object", "properties": {"a": {"not": {}}}}))
    assert caught.value.keyword == "not" and caught.value.path == "#/properties/a"
    with pytest.raises(errors.InvalidSchemaError):
        TokenFsm.from_json_schema("{not json", char_vocab())


def test_stats_report_rows_and_memory() -> None:
    fsm = TokenFsm.from_regex("[a-c]{3}", char_vocab())
    assert fsm.stats()["num_rows_built"] == 0
    assert fsm.build_all() == 4
    stats = fsm.stats()
    assert stats["num_rows_built"] == 4 and stats["memory_bytes"] > 0


def test_compile_releases_the_gil() -> None:
    """A long compile on one thread leaves the interpreter free for another."""
    vocab = Vocabulary([bytes([b]) for b in range(256)], [])
    ticks = 0
    started, done = threading.Event(), threading.Event()

    def compile_big() -> None:
        started.set()
        fsm = TokenFsm.from_regex(r"(\w|\d|\s){1,60}x", vocab)
        fsm.build_all()
        done.set()

    worker = threading.Thread(target=compile_big)
    worker.start()
    started.wait()
    while not done.is_set():
        ticks += 1
    worker.join()
    # Holding the GIL for the whole compile would leave this loop at a handful of iterations.
    assert ticks > 1000


def test_one_fsm_is_shared_by_many_threads() -> None:
    """Rows are built lazily behind once-cells: concurrent first fills agree with serial ones."""
    vocab = char_vocab((b'", "', b'"}', b"ab", b"\xc3"))
    pattern = r'\{"a": "[^"]*", "b": "[^"]*", "c": [0-9]+\}'
    shared = TokenFsm.from_regex(pattern, vocab)
    reference = TokenFsm.from_regex(pattern, vocab)
    reference.build_all()
    states = list(range(reference.stats()["num_states"]))
    expected = {s: reference.allowed_token_ids(s).tolist() for s in states}
    failures: list[str] = []
    barrier = threading.Barrier(6)

    def worker(offset: int) -> None:
        barrier.wait()
        out = np.zeros(shared.num_mask_words, dtype=np.int32)
        for state in states[offset:] + states[:offset]:
            shared.fill_bitmask(state, out)
            got = np.flatnonzero(np.unpackbits(out.view(np.uint8), bitorder="little")).tolist()
            if got != expected[state]:
                failures.append(f"state {state}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    shared.check_invariants()
