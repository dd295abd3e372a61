"""The compile cache and the batched bitmask helpers of `sglr.engine.constraints`."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from sglr import errors
from sglr._core import Vocabulary
from sglr.engine.constraints import (
    ConstraintCache,
    JsonSchemaConfig,
    allocate_token_bitmask,
    allowed_token_ids_from_bitmask,
    fill_token_bitmasks,
)


@pytest.fixture()
def vocab() -> Vocabulary:
    return Vocabulary([bytes([b]) for b in range(32, 127)] + [None], [95])


def test_cache_keys_on_text_options_and_vocabulary(vocab: Vocabulary) -> None:
    cache = ConstraintCache(max_entries=8)
    first = cache.regex("[0-9]+", vocab)
    assert cache.regex("[0-9]+", vocab) is first
    assert cache.regex("[0-9]+", Vocabulary([bytes([b]) for b in range(32, 127)] + [None], [95])) is first
    assert cache.regex("[0-9]*", vocab) is not first
    other_vocab = Vocabulary([b"0", b"1", None], [2])
    assert cache.regex("[0-9]+", other_vocab) is not first
    schema = {"type": "integer"}
    loose = cache.json_schema(schema, vocab)
    assert cache.json_schema('{"type":"integer"}', vocab) is not loose  # different text
    assert cache.json_schema(schema, vocab) is loose
    assert cache.json_schema(schema, vocab, JsonSchemaConfig(whitespace_pattern="")) is not loose
    assert (cache.num_hits, cache.num_misses) == (3, 6)
    assert len(cache) == 6


def test_cache_evicts_least_recently_used(vocab: Vocabulary) -> None:
    cache = ConstraintCache(max_entries=2)
    a = cache.regex("a", vocab)
    cache.regex("b", vocab)
    assert cache.regex("a", vocab) is a
    cache.regex("c", vocab)  # evicts "b"
    assert len(cache) == 2
    assert cache.regex("a", vocab) is a


def test_errors_propagate_and_are_not_cached(vocab: Vocabulary) -> None:
    cache = ConstraintCache()
    for _ in range(2):
        with pytest.raises(errors.InvalidRegexError):
            cache.regex("(", vocab)
    with pytest.raises(errors.UnsupportedSchemaError):
        cache.json_schema({"not": {}}, vocab)
    assert len(cache) == 0
    with pytest.raises(ValueError):
        JsonSchemaConfig(max_any_depth=-1)


def test_concurrent_callers_share_one_compile(vocab: Vocabulary) -> None:
    cache = ConstraintCache()
    results = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        results.append(cache.regex(r"(\w|\d){1,40}", vocab))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert cache.num_misses == 1


def test_batched_fill_into_a_padded_bitmask(vocab: Vocabulary) -> None:
    cache = ConstraintCache()
    digits, word = cache.regex("[0-9]+", vocab), cache.regex("yes|no", vocab)
    bitmask = allocate_token_bitmask(3, vocab_size=128)  # logits wider than the vocabulary
    assert bitmask.shape == (3, 4) and bitmask.dtype == np.int32
    bitmask[:] = -1
    fill_token_bitmasks([digits, word], [digits.start_state, word.start_state], bitmask, rows=[2, 0])
    assert allowed_token_ids_from_bitmask(bitmask[2], 128).tolist() == [b - 32 for b in b"0123456789"]
    assert allowed_token_ids_from_bitmask(bitmask[0], 128).tolist() == sorted([ord("y") - 32, ord("n") - 32])
    assert (bitmask[1] == -1).all()
    with pytest.raises(ValueError):
        allocate_token_bitmask(1, 0)


def accepts_text(constraint: object, text: str) -> bool:
    """Feeds `text` one printable-ASCII byte token at a time (vocabulary of the `vocab` fixture)."""
    state = constraint.start()  # type: ignore[attr-defined]
    return all(state.try_advance(ord(char) - 32) for char in text) and bool(state.is_accepting)


def test_free_values_at_any_depth_go_to_the_grammar(vocab: Vocabulary) -> None:
    cache = ConstraintCache()
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": True,
    }
    exact = JsonSchemaConfig(max_any_depth=None)
    with pytest.raises(errors.UnsupportedSchemaError) as refused:
        cache.json_schema(schema, vocab, exact)
    assert refused.value.keyword == "additionalProperties"
    grammar = cache.json_schema_grammar(json.dumps(schema), vocab, exact)
    deep = '{"a":1,"b":[[[[[[{"c":[1]}]]]]]]}'
    assert accepts_text(grammar, deep)
    assert not accepts_text(grammar, '{"a":"x","b":[]}')
    # By default the regex of free values unrolled 3 levels is too long to determinize
    # eagerly (the engine then takes the grammar path); with room, the FSM path unrolls them.
    with pytest.raises(errors.ConstraintTooLargeError):
        cache.json_schema(schema, vocab)
    bounded = cache.json_schema(schema, vocab, JsonSchemaConfig(max_regex_len=1 << 20))
    state = bounded.start_state
    for char in deep:
        state = bounded.try_advance(state, ord(char) - 32) if state is not None else None
    assert state is None


def test_implied_types_off_reads_typeless_keywords_as_the_specification(vocab: Vocabulary) -> None:
    cache = ConstraintCache()
    schema = {"type": "object", "properties": {"w": {"properties": {"n": {"type": "integer"}}}}}
    spec = JsonSchemaConfig(implied_types=False, max_any_depth=None)
    grammar = cache.json_schema_grammar(json.dumps(schema), vocab, spec)
    implied = cache.json_schema_grammar(json.dumps(schema), vocab, JsonSchemaConfig(max_any_depth=None))
    assert grammar is not implied  # the option is part of the key
    for text in ['{"w":{"n":1}}', '{"w":"text"}', '{"w":[1,{}]}']:
        assert accepts_text(grammar, text), text
    assert not accepts_text(grammar, '{"w":{"n":"1"}}')
    assert accepts_text(implied, '{"w":{"n":1}}')
    assert not accepts_text(implied, '{"w":"text"}')
    # The FSM path reads the option the same way.
    fsm = cache.json_schema(schema, vocab, JsonSchemaConfig(implied_types=False, max_regex_len=1 << 20))
    state = fsm.start_state
    for char in '{"w":"text"}':
        state = fsm.try_advance(state, ord(char) - 32) if state is not None else None
    assert state is not None and fsm.is_accepting(state)
