"""Few-shot question answering over a batch: the shared few-shot prefix is cached once
(`run_batch` sends it first), then every question reuses it.

    python examples/few_shot_qa.py --backend runtime --url http://127.0.0.1:30000
"""

from __future__ import annotations

import sglr as sgl
from lang_backends import example_args

SHOTS = [
    ("What is the capital of France?", "Paris"),
    ("How many legs does a spider have?", "Eight"),
    ("Which planet is known as the red planet?", "Mars"),
    ("What gas do plants absorb from the air?", "Carbon dioxide"),
]
QUESTIONS = ["What is the largest ocean?", "Who wrote Hamlet?", "What is frozen water called?"]


@sgl.function
def few_shot_qa(s, question):
    examples = "".join(f"Q: {q}\nA: {a}\n\n" for q, a in SHOTS)
    s += sgl.user("Answer with a short phrase.\n\n" + examples + "Q: " + question)
    s += sgl.assistant(sgl.gen("answer", max_tokens=32, stop="\n"))


def main(argv=None) -> list[str]:
    _, backend = example_args(__doc__, argv)
    states = few_shot_qa.run_batch([{"question": q} for q in QUESTIONS], backend=backend, temperature=0)
    answers = [state["answer"].strip() for state in states]
    for question, answer in zip(QUESTIONS, answers, strict=True):
        print(f"{question} -> {answer}")
    return answers


if __name__ == "__main__":
    main()
