"""Multi-dimensional essay judge (branch-solve-merge): check the essay is on topic (select),
judge every dimension in a parallel branch from the shared prefix, merge the judgments into a
summary and grade, and return them as JSON constrained by a regex.

    python examples/essay_judge.py --backend runtime --url http://127.0.0.1:30000
"""

from __future__ import annotations

import json

import sglr as sgl
from lang_backends import example_args

DIMENSIONS = ["Clarity", "Originality", "Evidence", "Structure", "Grammar", "Persuasiveness"]
VERDICT_REGEX = r'\{"summary": "[\w\d\s.,;:!?\'-]{1,300}", "grade": "[ABCD][+-]?"\}'
ESSAY = "Cities should plant more trees. Trees cool streets, clean the air and make people calmer."


@sgl.function(num_api_spec_tokens=256)
def essay_judge(s, essay, topic="city life"):
    s += sgl.system("You are an expert essay grader.")
    s += sgl.user("Essay:\n" + essay + f"\nIs this essay about {topic}? Answer yes or no.")
    s += sgl.assistant(sgl.select("related", choices=["yes", "no"]))
    if s["related"] == "no":
        return None
    forks = s.fork(len(DIMENSIONS))
    for fork, dimension in zip(forks, DIMENSIONS, strict=True):
        fork += sgl.user(f"Judge the essay's {dimension.lower()} in two sentences, then write END.")
        fork += sgl.assistant("Judgment:" + sgl.gen("judgment", max_tokens=128, stop="END"))
    judgments = "\n".join(f"{d}:{f['judgment']}" for d, f in zip(DIMENSIONS, forks, strict=True))
    s += sgl.user("Judgments:\n" + judgments + "\nSummarize them in one sentence and grade the essay (A-D).")
    s += sgl.assistant("Summary:" + sgl.gen("summary", stop="\n") + "\nGrade:" + sgl.gen("grade", stop="\n"))
    s += sgl.user('Return the summary and grade as JSON with keys "summary" and "grade".')
    s += sgl.assistant(sgl.gen("verdict", max_tokens=256, regex=VERDICT_REGEX))
    return json.loads(s["verdict"])


def main(argv=None) -> dict | None:
    _, backend = example_args(__doc__, argv)
    verdict = essay_judge.run(essay=ESSAY, backend=backend, temperature=0).ret_value
    print(json.dumps(verdict, indent=2))
    return verdict


if __name__ == "__main__":
    main()
