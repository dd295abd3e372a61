"""The essay judge of examples/essay_judge.py written against the raw `openai` client with
threads, for the productivity comparison (examples/line_counts.py).

    python examples/raw_openai/essay_judge.py --base-url http://127.0.0.1:30000/v1 --model NAME
"""

from __future__ import annotations

import argparse
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor

import openai

DIMENSIONS = ["Clarity", "Originality", "Evidence", "Structure", "Grammar", "Persuasiveness"]
VERDICT_REGEX = r'\{"summary": "[\w\d\s.,;:!?\'-]{1,300}", "grade": "[ABCD][+-]?"\}'
ESSAY = "Cities should plant more trees. Trees cool streets, clean the air and make people calmer."


def chat(client, model, messages, **kwargs):
    response = client.chat.completions.create(model=model, messages=messages, temperature=0, **kwargs)
    return response.choices[0]


def essay_judge(client, model, essay, topic="city life"):
    messages = [
        {"role": "system", "content": "You are an expert essay grader."},
        {"role": "user", "content": "Essay:\n" + essay + f"\nIs this essay about {topic}? Answer yes or no."},
    ]
    # select: compare the logprobs of the two answers' first tokens
    top = chat(client, model, messages, max_tokens=1, logprobs=True, top_logprobs=20).logprobs.content[0]
    scores = {"yes": float("-inf"), "no": float("-inf")}
    for candidate in top.top_logprobs:
        for choice in scores:
            if candidate.token.strip() and choice.startswith(candidate.token.strip().lower()):
                scores[choice] = max(scores[choice], candidate.logprob)
    related = max(scores, key=scores.get)
    if related == "no":
        return None
    messages.append({"role": "assistant", "content": related})

    def judge(dimension):
        request = f"Judge the essay's {dimension.lower()} in two sentences, then write END."
        reply = chat(
            client, model, [*messages, {"role": "user", "content": request}], max_tokens=128, stop="END"
        )
        return reply.message.content.removeprefix("Judgment:")

    with ThreadPoolExecutor(len(DIMENSIONS)) as pool:
        judgments = list(pool.map(judge, DIMENSIONS))
    merged = "\n".join(f"{d}:{j}" for d, j in zip(DIMENSIONS, judgments, strict=True))
    request = "Judgments:\n" + merged + "\nSummarize them in one sentence and grade the essay (A-D)."
    request += " Answer in two lines: 'Summary: ...' and 'Grade: ...'."
    messages.append({"role": "user", "content": request})
    reply = chat(client, model, messages, max_tokens=256).message.content
    summary = re.search(r"Summary:(.*)", reply)
    grade = re.search(r"Grade:(.*)", reply)
    if summary is None or grade is None:
        raise ValueError(f"unexpected reply: {reply!r}")
    messages.append({"role": "assistant", "content": f"Summary:{summary[1]}\nGrade:{grade[1]}"})
    messages.append(
        {"role": "user", "content": 'Return the summary and grade as JSON with keys "summary" and "grade".'}
    )
    verdict = chat(
        client, model, messages, max_tokens=256, extra_body={"regex": VERDICT_REGEX}
    ).message.content
    return json.loads(verdict)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    args = parser.parse_args(argv)
    client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key or "EMPTY")
    verdict = essay_judge(client, args.model, ESSAY)
    print(json.dumps(verdict, indent=2))
    return verdict


if __name__ == "__main__":
    main()
