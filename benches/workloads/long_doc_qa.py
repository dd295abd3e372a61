"""Long-document QA: a document of several segments (a few thousand tokens), many questions per
document; each question reads the segments in order, then answers."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY_FIXED_LENGTH, ProgramWorkload, sized
from workloads.synthetic import words

SIZES = {
    "smoke": {
        "num_documents": 2,
        "questions_per_document": 2,
        "num_segments": 2,
        "segment_words": 60,
        "answer_tokens": 4,
    },
    "cpu": {
        "num_documents": 2,
        "questions_per_document": 8,
        "num_segments": 4,
        "segment_words": 700,
        "answer_tokens": 16,
    },
    "gpu": {
        "num_documents": 16,
        "questions_per_document": 32,
        "num_segments": 6,
        "segment_words": 1000,
        "answer_tokens": 64,
    },
}


@sgl.function
def document_question(s, segments, question, answer_tokens):
    s += "Read the document, then answer the question.\n"
    for number, segment in enumerate(segments, 1):
        s += f"\n[Segment {number}]\n{segment}\n"
    s += "\nQuestion: " + question + "\nAnswer:" + sgl.gen("answer", max_tokens=answer_tokens)


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    arguments = []
    for _ in range(size.num_documents):
        segments = [words(rng, size.segment_words) for _ in range(size.num_segments)]
        arguments += [
            {"segments": segments, "question": words(rng, 20) + "?", "answer_tokens": size.answer_tokens}
            for _ in range(size.questions_per_document)
        ]
    rng.shuffle(arguments)
    return ProgramWorkload("long-doc-qa", document_question, arguments, dict(GREEDY_FIXED_LENGTH))
