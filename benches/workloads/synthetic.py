"""Seeded synthetic text: words drawn from a fixed list of common English words.

Each word is one token (with its leading space) in cl100k_base (a vocabulary like Llama 3's), in
SmolLM2's, and in the tiny test tokenizer, which is trained on Python source (so the list keeps to
words common in code and prose alike). A length in words thus stands in for a length
in tokens; the runner's shapes table shows the measured prompt tokens per request.
"""

from __future__ import annotations

import random

_WORDS_TEXT = """
    the of and to in is for that with as on by this from are be or at an it not can which have all
    more their will one has other when there also into time use these some may would two like then
    first any such been new over only most data way even used each work need much part call value
    state name list line type text code form point case end set test result order field node item
    group class level start power table number file path string error default return object key
    user date size message process system option index input output format source version module
    local global public parent child section current simple given found same next last left right
    open close read write check find make take keep show run long small large old different able
    short full real sure clear true year day week month place man hand
"""
_NAMES_TEXT = """
    Alice Bruno Clara Diego Elena Farid Grace Hiro Ines Jonas Kira Liam Maya Nils Olga Pavel Quinn
    Rosa Sami Tara Umar Vera Wen Ximena Yuri Zoe
"""
WORDS = tuple(_WORDS_TEXT.split())
NAMES = tuple(_NAMES_TEXT.split())


def words(rng: random.Random, num_words: int) -> str:
    """`num_words` words in sentences of 6 to 14 words, each ending with a period."""
    out: list[str] = []
    sentence_left = rng.randrange(6, 15)
    for _ in range(num_words):
        word = rng.choice(WORDS)
        sentence_left -= 1
        if sentence_left == 0:
            word += "."
            sentence_left = rng.randrange(6, 15)
        out.append(word)
    return " ".join(out)


def between(rng: random.Random, low: int, high: int) -> int:
    """A length uniform in [low, high] (inclusive)."""
    return rng.randint(low, high)


def name(rng: random.Random) -> str:
    return rng.choice(NAMES)
