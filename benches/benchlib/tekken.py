"""A 131,072-token production vocabulary for the constraint benchmarks: Tekken (the tokenizer of
Mistral NeMo and Pixtral), read from the data file inside the `mistral-common` wheel. The wheel
is fetched once into `~/.cache/sglr/tekken` (`pip download --no-deps`) and read as a zip: it is
never installed, because an installed `mistral_common` without its dependencies makes
`transformers` pick a tokenizer backend that cannot import. `$SGLR_TEKKEN_JSON` names the data
file directly instead.

Tekken is a tiktoken-style byte-level BPE: ids 0..999 are special tokens (1 `<s>`, 2 `</s>`),
id 1000 + r is the token of merge rank r. It is built here as a `tiktoken.Encoding` so that the
same object tokenizes the test instances and feeds llguidance, as cl100k_base does.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

TEKKEN_FILE = "tekken_240911.json"
NUM_SPECIAL = 1000
VOCAB_SIZE = 131_072
EOS_ID = 2
CACHE_DIR = Path.home() / ".cache" / "sglr" / "tekken"
_SPECIAL_NAMES = {0: "<unk>", 1: "<s>", 2: "</s>"}


def tekken_data() -> dict:
    """The Tekken data file's contents: `$SGLR_TEKKEN_JSON`, else from the cached wheel
    (downloaded on first use)."""
    explicit = os.environ.get("SGLR_TEKKEN_JSON")
    if explicit:
        return json.loads(Path(explicit).read_text())
    wheels = sorted(CACHE_DIR.glob("mistral_common-*.whl"))
    if not wheels:
        print(f"fetching the mistral-common wheel (Tekken vocabulary) into {CACHE_DIR}", file=sys.stderr)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                str(CACHE_DIR),
                "mistral-common",
            ],
            check=True,
        )
        wheels = sorted(CACHE_DIR.glob("mistral_common-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as wheel:
        return json.loads(wheel.read(f"mistral_common/data/{TEKKEN_FILE}"))


def tekken_encoding() -> Any:
    """Tekken as a `tiktoken.Encoding` of exactly `VOCAB_SIZE` ids (EOS: `EOS_ID`)."""
    import tiktoken

    data = tekken_data()
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
