"""Seeded synthetic text: words drawn from a fixed list of common English words.

Common English words are about one token each in byte-level BPE vocabularies (Llama 3, SmolLM2
and the tiny test tokenizer alike), so a length in words stands in for a length in tokens; the
runner prints the measured prompt tokens per request, which shows how close that is.
"""

from __future__ import annotations

import random

_WORDS_TEXT = """
    the of and to in is for that with as on by this from are be or at an it not can which have
    all more their will one has other when there also into time use these some may would two like
    then first any such been new over only most data way even well made used each work need much
    part call value state name list line type text code form point case end set test result
    order field node item group class level start city river water light house road market school
    music story night money power paper table window garden science history number answer question
    people world family friend morning evening winter summer spring autumn mountain forest
    island village doctor teacher student farmer engineer writer painter player leader member
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
