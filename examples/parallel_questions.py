"""Fork/join: several questions answered in parallel branches of one conversation.

The shared prompt is cached once before the branches start (the fork hint), every branch
reuses it, and the engine decodes all branches in the same batches. `join()` gathers each
branch's answer into a list in the parent state.

    python examples/parallel_questions.py [--backend engine --model-path PATH]
"""

from __future__ import annotations

import sglr as sgl
from lang_backends import example_args

QUESTIONS = [
    "What is the capital of France?",
    "What is the capital of Japan?",
    "What is the capital of Italy?",
    "What is the capital of Spain?",
]


@sgl.function
def parallel_questions(s, questions):
    s += sgl.system("You are a helpful assistant. Answer in one short sentence.")
    forks = s.fork(len(questions))
    for fork, question in zip(forks, questions, strict=True):
        fork += sgl.user(question)
        fork += sgl.assistant(sgl.gen("answer", max_tokens=32, stop="\n"))
    forks.join()  # s["answer"]: the branches' answers, in fork order


def main(argv=None) -> list[str]:
    _, backend = example_args(__doc__, argv)
    state = parallel_questions.run(questions=QUESTIONS, backend=backend, temperature=0)
    answers = [answer.strip() for answer in state["answer"]]
    for question, answer in zip(QUESTIONS, answers, strict=True):
        print(f"{question} -> {answer}")
    return answers


if __name__ == "__main__":
    main()
