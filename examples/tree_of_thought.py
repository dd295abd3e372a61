"""Tree-of-thought search: at every level, fork several candidate next steps, let the model rate
each one (a constrained digit), and continue from the best.

    python examples/tree_of_thought.py --backend runtime --url http://127.0.0.1:30000
"""

from __future__ import annotations

import sglr as sgl
from lang_backends import example_args

PROBLEM = "Use 4, 6, 8 and 2 with + - * / to make 24. Each number once."


@sgl.function
def tree_of_thought(s, problem, breadth=3, depth=2):
    s += sgl.user(problem + "\nSolve it one step per reply.")
    for level in range(depth):
        candidates = s.fork(breadth)
        candidates += sgl.assistant(sgl.gen("step", max_tokens=96, temperature=0.8))
        candidates += sgl.user("Rate how promising that step is, from 1 to 9. Reply with the digit.")
        candidates += sgl.assistant(sgl.gen("score", max_tokens=2, regex="[1-9]"))
        scores = [int(c["score"].strip()) if c["score"].strip().isdigit() else 0 for c in candidates]
        best = candidates[scores.index(max(scores))]
        s += sgl.assistant(best["step"])
        s += sgl.user("Next step." if level + 1 < depth else "Now give the final expression only.")
    s += sgl.assistant(sgl.gen("answer", max_tokens=64, temperature=0))


def main(argv=None) -> str:
    _, backend = example_args(__doc__, argv)
    state = tree_of_thought.run(problem=PROBLEM, backend=backend)
    print(state["answer"])
    return state["answer"]


if __name__ == "__main__":
    main()
