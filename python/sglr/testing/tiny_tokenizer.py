"""The tiny models' tokenizer: a byte-level BPE trained on the Python standard library's source.

Every machine with Python has that text, so nothing is downloaded; training on about a megabyte
takes well under a second and is deterministic for a given Python installation and `tokenizers`
version. The result is cached in memory and under `sglr.envs.cache_dir()`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sysconfig
from pathlib import Path
from typing import Any

from sglr.envs import cache_dir

# Bump when the training recipe changes, so cached tokenizers are retrained.
TOKENIZER_VERSION = 1
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_CORPUS_CHARS = 1_000_000


def _stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def corpus_key() -> str:
    """Identifies the training text (the standard library it comes from)."""
    files = sorted(_stdlib_dir().glob("*.py"))
    return f"{_stdlib_dir()}:{len(files)}:{sum(f.stat().st_size for f in files[:64])}"


def _corpus() -> list[str]:
    """About a megabyte of Python source (code and docstrings) from the standard library."""
    texts: list[str] = []
    total = 0
    for path in sorted(_stdlib_dir().glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        texts.append(text)
        total += len(text)
        if total >= _CORPUS_CHARS:
            return texts
    # Installs without .py sources still carry docstrings on the builtins.
    import builtins

    texts.extend(str(getattr(obj, "__doc__", "") or "") for obj in vars(builtins).values())
    return texts


_TOKENIZER_MEMO: dict[int, str] = {}


def trained_tokenizer_json(vocab_size: int) -> str:
    """The tokenizer as JSON, trained once per process (and cached on disk across processes)."""
    if vocab_size in _TOKENIZER_MEMO:
        return _TOKENIZER_MEMO[vocab_size]
    import tokenizers

    key = hashlib.sha256(
        json.dumps([TOKENIZER_VERSION, vocab_size, corpus_key(), tokenizers.__version__]).encode()
    ).hexdigest()[:16]
    cached = cache_dir() / "tiny-tokenizers" / f"bpe-{key}.json"
    if cached.is_file():
        text = cached.read_text()
    else:
        text = _train_tokenizer(vocab_size).to_str()
        cached.parent.mkdir(parents=True, exist_ok=True)
        staging = cached.with_suffix(f".{os.getpid()}.tmp")
        staging.write_text(text)
        os.replace(staging, cached)
    _TOKENIZER_MEMO[vocab_size] = text
    return text


def _train_tokenizer(vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer)
    if tokenizer.get_vocab_size() != vocab_size:
        # The model's embedding rows must match; a short corpus would leave the vocab smaller.
        raise RuntimeError(
            f"tokenizer training produced {tokenizer.get_vocab_size()} tokens, not {vocab_size}"
        )
    return tokenizer
