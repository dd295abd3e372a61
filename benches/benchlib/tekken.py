"""A 131,072-token production vocabulary for the constraint benchmarks: Tekken (the tokenizer of
Mistral NeMo and Pixtral), read from the data file that the `mistral-common` wheel ships. It
needs no network and none of that package's dependencies:

    .venv/bin/pip install --no-deps mistral-common

Tekken is a tiktoken-style byte-level BPE: ids 0..999 are special tokens (1 `<s>`, 2 `</s>`),
id 1000 + r is the token of merge rank r. It is built here as a `tiktoken.Encoding` so that the
same object tokenizes the test instances and feeds llguidance, as cl100k_base does.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

TEKKEN_FILE = "tekken_240911.json"
NUM_SPECIAL = 1000
VOCAB_SIZE = 131_072
EOS_ID = 2
_SPECIAL_NAMES = {0: "<unk>", 1: "<s>", 2: "</s>"}


def tekken_path() -> Path:
    """The Tekken data file: `$SGLR_TEKKEN_JSON`, else inside the installed `mistral-common`
    (located without importing it, which would need its dependencies)."""
    explicit = os.environ.get("SGLR_TEKKEN_JSON")
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "the Tekken vocabulary needs `pip install --no-deps mistral-common` (or SGLR_TEKKEN_JSON)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data" / TEKKEN_FILE


def tekken_encoding() -> Any:
    """Tekken as a `tiktoken.Encoding` of exactly `VOCAB_SIZE` ids (EOS: `EOS_ID`)."""
    import tiktoken

    data = json.loads(tekken_path().read_text())
    num_ranks = VOCAB_SIZE - NUM_SPECIAL
    ranks = {
        base64.b64decode(entry["token_bytes"]): NUM_SPECIAL + entry["rank"]
        for entry in data["vocab"][:num_ranks]
    }
    if len(ranks) != num_ranks:
        raise ValueError(f"{TEKKEN_FILE}: {num_ranks - len(ranks)} duplicate token byte strings")
    special = {_SPECIAL_NAMES.get(i, f"<SPECIAL_{i}>"): i for i in range(NUM_SPECIAL)}
    return tiktoken.Encoding(
        name="tekken",
        pat_str=data["config"]["pattern"],
        mergeable_ranks=ranks,
        special_tokens=special,
        explicit_n_vocab=VOCAB_SIZE,
    )
