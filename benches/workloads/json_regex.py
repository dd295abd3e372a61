"""JSON decoding over a long document: a ~3k-token document, then the fields of a JSON record, each a
`gen` constrained by a regex (the constant JSON syntax between them is plain prompt text)."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {"num_documents": 2, "document_words": 150},
    "cpu": {"num_documents": 6, "document_words": 3000},
    "gpu": {"num_documents": 128, "document_words": 3000},
}
FIELDS = (
    ("name", r"[A-Z][a-z]{1,10}( [A-Z][a-z]{1,10})?"),
    ("born", r"1[0-9]{3}|20[0-2][0-9]"),
    ("country", r"[A-Z][a-z]{2,12}"),
    ("occupation", r"[a-z]{3,12}( [a-z]{3,12})?"),
    ("known_for", r"[a-z ]{4,40}"),
)


@sgl.function
def json_fields(s, document):
    s += "Read the biography and extract the person's record as JSON.\n\n" + document + "\n\nRecord:\n{\n"
    for index, (field, regex) in enumerate(FIELDS):
        separator = ",\n" if index < len(FIELDS) - 1 else "\n"
        s += f'  "{field}": "' + sgl.gen(field, max_tokens=24, regex=regex) + '"' + separator
    s += "}\n"


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    arguments = [{"document": words(rng, size.document_words)} for _ in range(size.num_documents)]
    return ProgramWorkload(
        "json-regex", json_fields, arguments, dict(GREEDY), plain_generation=False, constrained=True
    )
