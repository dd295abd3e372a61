"""Multiple choice with `select`: the model scores every option (mean token log-probability of
the option after the question) and the best one becomes the answer; no free text is sampled.

    python examples/multiple_choice.py [--backend engine --model-path PATH]
"""

from __future__ import annotations

import sglr as sgl
from lang_backends import example_args

QUIZ = [
    ("What is the capital of Japan?", ["Seoul", "Beijing", "Tokyo", "Bangkok"]),
    ("Which animal says meow?", ["a dog", "a cat", "a cow", "a duck"]),
    ("What do bees make?", ["milk", "honey", "bread", "silk"]),
    ("What is the opposite of hot?", ["cold", "warm", "wet", "big"]),
    ("Is the sun a star?", ["yes", "no"]),
]


@sgl.function
def multiple_choice(s, question, options):
    s += sgl.user(question)
    s += sgl.assistant(sgl.select("answer", choices=options))


def main(argv=None) -> list[str]:
    _, backend = example_args(__doc__, argv)
    states = multiple_choice.run_batch(
        [{"question": question, "options": options} for question, options in QUIZ], backend=backend
    )
    answers = [state["answer"] for state in states]
    for (question, options), answer in zip(QUIZ, answers, strict=True):
        print(f"{question} {options} -> {answer}")
    return answers


if __name__ == "__main__":
    main()
