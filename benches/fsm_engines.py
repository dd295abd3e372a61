"""Adapters that give sglr and the reference constraint engines one interface for
`benches/fsm_compare.py`: build a tokenizer context once, compile a pattern, then fill a mask
and advance by a token per decode step. Engines that are not installed are skipped."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class VocabCase:
    """One vocabulary in every form the engines want."""

    name: str
    token_bytes: list[bytes | None]  # None: special / unused
    eos: int
    hf_tokenizer: Any = None  # transformers tokenizer, when the vocabulary came from one
    tiktoken_encoding: Any = None

    @property
    def size(self) -> int:
        return len(self.token_bytes)


class Walker:
    """Per-request matcher state: `fill` writes the int32 bitmask, `advance` consumes."""

    def fill(self, mask: np.ndarray) -> None:
        raise NotImplementedError

    def advance(self, token: int) -> bool:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError


class SglrEngine:
    name = "sglr"

    def prepare(self, case: VocabCase) -> Any:
        from sglr._core import Vocabulary

        return Vocabulary(case.token_bytes, [case.eos])

    def compile(self, vocab: Any, pattern: str, schema: dict | None) -> Any:
        from sglr._core import TokenFsm

        if schema is not None:
            return TokenFsm.from_json_schema(json.dumps(schema), vocab)
        return TokenFsm.from_regex(pattern, vocab)

    def walker(self, fsm: Any) -> Walker:
        return _SglrWalker(fsm)

    def forget(self, vocab: Any) -> None:
        """Drops the per-vocabulary shared walks so every repeat starts cold."""
        vocab.clear_caches()

    def memory_bytes(self, fsm: Any) -> int:
        return fsm.stats()["memory_bytes"]


class _SglrWalker(Walker):
    def __init__(self, fsm: Any) -> None:
        self.fsm, self.state = fsm, fsm.start_state

    def fill(self, mask: np.ndarray) -> None:
        self.fsm.fill_bitmask(self.state, mask)

    def advance(self, token: int) -> bool:
        state = self.fsm.try_advance(self.state, token)
        if state is None:
            return False
        self.state = state
        return True

    def reset(self) -> None:
        self.state = self.fsm.start_state


class OutlinesEngine:
    name = "outlines-core"
    module = "outlines_core"

    def prepare(self, case: VocabCase) -> Any:
        import outlines_core

        by_bytes: dict[bytes, list[int]] = {}
        for token_id, token in enumerate(case.token_bytes):
            if token:
                by_bytes.setdefault(token, []).append(token_id)
        return outlines_core.Vocabulary(case.eos, by_bytes)

    def compile(self, vocab: Any, pattern: str, schema: dict | None) -> Any:
        import outlines_core

        return outlines_core.Index(pattern, vocab), vocab.get_eos_token_id()

    def native_schema(self, vocab: Any, schema: dict) -> Any:
        import outlines_core
        from outlines_core.json_schema import build_regex_from_schema

        return outlines_core.Index(
            build_regex_from_schema(json.dumps(schema)), vocab
        ), vocab.get_eos_token_id()

    def walker(self, compiled: Any) -> Walker:
        return _OutlinesWalker(*compiled)

    def memory_bytes(self, index: Any) -> int | None:
        return None


class _OutlinesWalker(Walker):
    def __init__(self, index: Any, eos: int) -> None:
        import outlines_core

        self.guide, self.eos = outlines_core.Guide(index), eos

    def fill(self, mask: np.ndarray) -> None:
        self.guide.write_mask_into(mask.ctypes.data, mask.size, 4)
        self.mask = mask

    def advance(self, token: int) -> bool:
        if token == self.eos:
            # Advancing a finished guide by EOS raises; what counts is that the mask allowed it.
            return bool((int(self.mask[token >> 5]) >> (token & 31)) & 1)
        try:
            self.guide.advance(token, return_tokens=False)
        except ValueError:
            return False
        return True

    def reset(self) -> None:
        self.guide.reset()


class XGrammarEngine:
    name = "xgrammar"
    module = "xgrammar"

    def prepare(self, case: VocabCase) -> Any:
        import xgrammar

        if case.hf_tokenizer is not None:
            info = xgrammar.TokenizerInfo.from_huggingface(case.hf_tokenizer, vocab_size=case.size)
        else:
            raw = [token or b"" for token in case.token_bytes]
            info = xgrammar.TokenizerInfo(
                raw, xgrammar.VocabType.RAW, vocab_size=case.size, stop_token_ids=[case.eos]
            )
        return xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, compiler: Any, pattern: str, schema: dict | None) -> Any:
        return compiler.compile_regex(pattern)

    def native_schema(self, compiler: Any, schema: dict) -> Any:
        return compiler.compile_json_schema(json.dumps(schema), any_whitespace=False)

    def walker(self, compiled: Any) -> Walker:
        return _XGrammarWalker(compiled)

    def memory_bytes(self, compiled: Any) -> int | None:
        return compiled.memory_size_bytes


class _XGrammarWalker(Walker):
    def __init__(self, compiled: Any) -> None:
        import xgrammar

        self.matcher = xgrammar.GrammarMatcher(compiled)
        self.batch: np.ndarray | None = None

    def fill(self, mask: np.ndarray) -> None:
        self.matcher.fill_next_token_bitmask(mask.reshape(1, -1))

    def advance(self, token: int) -> bool:
        return bool(self.matcher.accept_token(token))

    def reset(self) -> None:
        self.matcher.reset()


class LLGuidanceEngine:
    name = "llguidance"
    module = "llguidance"

    def prepare(self, case: VocabCase) -> Any:
        if case.tiktoken_encoding is not None:
            import llguidance.tiktoken

            return llguidance.tiktoken.lltokenizer_from_encoding(case.tiktoken_encoding, n_vocab=case.size)
        import llguidance.hf

        return llguidance.hf.from_tokenizer(case.hf_tokenizer, n_vocab=case.size)

    def compile(self, tokenizer: Any, pattern: str, schema: dict | None) -> Any:
        import llguidance

        return (tokenizer, llguidance.grammar_from("regex", pattern))

    def native_schema(self, tokenizer: Any, schema: dict) -> Any:
        import llguidance

        return (tokenizer, llguidance.grammar_from("json_schema", json.dumps(schema)))

    def walker(self, compiled: Any) -> Walker:
        return _LLGuidanceWalker(*compiled)

    def memory_bytes(self, compiled: Any) -> int | None:
        return None


class _LLGuidanceWalker(Walker):
    def __init__(self, tokenizer: Any, grammar: str) -> None:
        import llguidance

        self.matcher = llguidance.LLMatcher(tokenizer, grammar)
        if self.matcher.is_error():
            raise ValueError(self.matcher.get_error())

    def fill(self, mask: np.ndarray) -> None:
        self.matcher.unsafe_compute_mask_ptr(mask.ctypes.data, mask.nbytes)

    def advance(self, token: int) -> bool:
        return bool(self.matcher.consume_token(token))

    def reset(self) -> None:
        self.matcher.reset()


def available_engines() -> list[Any]:
    """sglr first, then every reference engine whose package imports."""
    engines: list[Any] = [SglrEngine()]
    for engine in (OutlinesEngine(), XGrammarEngine(), LLGuidanceEngine()):
        if importlib.util.find_spec(engine.module) is not None:
            engines.append(engine)
    return engines


ALL_ENGINE_NAMES = ["sglr", "outlines-core", "xgrammar", "llguidance"]
