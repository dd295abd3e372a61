"""Tool-call constraints on SmolLM2's vocabulary (49k tokens): compile time and per-step mask
time of the same language through sglr's two paths, side by side in one run. The case that
matters is `tool_choice: "auto"` with strict tools (free text without the call marker, or
calls), which the server sends as one regex (FSM) unless a schema is recursive (grammar).

    .venv/bin/python benches/tool_call_masks.py [--steps 20]

"first": the first mask of a state (FSM rows are built lazily and memoised); "mask": the mean
of `--steps` further fills of the same state. The texts are prefixes of a reply: empty, free
text, and inside a call's arguments.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from sglr._core import GrammarConstraint, TokenFsm
from sglr.engine.constraints.vocab import vocabulary_from_hf
from sglr.engine.tokenizer import EngineTokenizer
from sglr.model.default_model import resolve_model_path
from sglr.server.tools.constraint import forced_call_constraint
from sglr.server.tools.formats import HERMES
from sglr.server.tools.free_text import free_text_rules
from sglr.server.tools.request import read_tool_request

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA, "strict": True}}
TEXTS = [
    "",
    "The weather in Paris is",
    'Sure. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa',
]


def _as_grammar(regex_constraint: str) -> str:
    """The same language as GBNF, built the way the server builds it when a schema is
    recursive: free text and the calls as separate lexemes."""
    request = read_tool_request({"tools": [TOOL]})
    forced = forced_call_constraint(read_tool_request({"tools": [TOOL], "tool_choice": "required"}), HERMES)
    assert request.choice == "auto" and forced is not None and forced.field == "regex"
    calls = forced.text.replace("/", "\\/")
    return f"root ::= free_text | free_text calls\ncalls ::= /{calls}/\n" + free_text_rules(
        "free_text", HERMES.marker
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/sglr-bench-cache"))
    args = parser.parse_args()
    tokenizer = EngineTokenizer(resolve_model_path(None, cache_dir=args.cache_dir))
    vocabulary = vocabulary_from_hf(tokenizer.hf, sorted(tokenizer.eos_token_ids))
    constraint = forced_call_constraint(read_tool_request({"tools": [TOOL]}), HERMES)
    assert constraint is not None and constraint.field == "regex"

    rows = []
    start = time.perf_counter()
    fsm = TokenFsm.from_regex(constraint.text, vocabulary)
    fsm_compile = time.perf_counter() - start
    start = time.perf_counter()
    grammar = GrammarConstraint.from_ebnf(_as_grammar(constraint.text), vocabulary)
    grammar_compile = time.perf_counter() - start
    mask = np.zeros(vocabulary.num_mask_words, dtype=np.int32)
    for text in TEXTS:
        state = fsm.advance_bytes(fsm.start_state, text.encode())
        assert state is not None
        start = time.perf_counter()
        fsm.fill_bitmask(state, mask)
        fsm_first = time.perf_counter() - start
        fsm_bits = mask.copy()
        start = time.perf_counter()
        for _ in range(args.steps):
            fsm.fill_bitmask(state, mask)
        fsm_mask = (time.perf_counter() - start) / args.steps
        chart = grammar.start()
        assert chart.advance_bytes(text.encode())
        start = time.perf_counter()
        chart.fill_bitmask(mask)
        grammar_first = time.perf_counter() - start
        assert np.array_equal(mask, fsm_bits), "the two paths must allow the same tokens"
        start = time.perf_counter()
        for _ in range(args.steps):
            chart.fill_bitmask(mask)
        grammar_mask = (time.perf_counter() - start) / args.steps
        rows.append((len(text), fsm_first, fsm_mask, grammar_first, grammar_mask))

    print(
        f"vocabulary: {vocabulary.vocab_size} tokens; compile: FSM {fsm_compile * 1e3:.1f} ms, grammar {grammar_compile * 1e3:.1f} ms"
    )
    print(
        f"{'prefix bytes':>12} {'FSM first':>10} {'FSM mask':>10} {'grammar first':>14} {'grammar mask':>13} {'grammar/FSM':>12}"
    )
    for num_bytes, fsm_first, fsm_mask, grammar_first, grammar_mask in rows:
        ratio = grammar_mask / max(fsm_mask, 1e-9)
        print(
            f"{num_bytes:>12} {fsm_first * 1e6:>8.0f}us {fsm_mask * 1e6:>8.1f}us {grammar_first * 1e6:>12.0f}us"
            f" {grammar_mask * 1e6:>11.0f}us {ratio:>11.0f}x"
        )


if __name__ == "__main__":
    main()
