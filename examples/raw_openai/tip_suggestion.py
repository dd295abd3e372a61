"""The tip suggestion of examples/tip_suggestion.py written against the raw `openai` client with
threads, for the productivity comparison (examples/line_counts.py).

    python examples/raw_openai/tip_suggestion.py --base-url http://127.0.0.1:30000/v1 --model NAME
"""

from __future__ import annotations

import argparse
import os
import re
from concurrent.futures import ThreadPoolExecutor

import openai


def chat(client, model, messages, max_tokens):
    response = client.chat.completions.create(
        model=model, messages=messages, max_tokens=max_tokens, temperature=0
    )
    return response.choices[0].message.content


def expand_tip(client, model, topic, tip):
    request = f"Expand this tip about {topic} into one short paragraph: {tip}"
    return chat(client, model, [{"role": "user", "content": request}], 256)


def tip_suggestion(client, model, topic):
    messages = [
        {"role": "system", "content": "You are a helpful assistant who gives useful tips."},
        {"role": "user", "content": f"Give three short tips about {topic}, numbered, one per line."},
    ]
    skeleton = chat(client, model, messages, 128)
    tips = re.findall(r"^\s*[1-3]\.\s*(.*?)\s*$", skeleton, flags=re.MULTILINE)
    if len(tips) != 3:
        raise ValueError(f"expected three numbered tips, got {skeleton!r}")
    messages.append({"role": "assistant", "content": "".join(f"{i}.{t}\n" for i, t in enumerate(tips, 1))})
    with ThreadPoolExecutor(3) as pool:
        paragraphs = list(pool.map(lambda tip: expand_tip(client, model, topic, tip), tips))
    request = "Summarize these expanded tips:\n" + "\n".join(paragraphs)
    request += "\nStart your answer with 'In summary,'."
    messages.append({"role": "user", "content": request})
    summary = chat(client, model, messages, 256)
    return summary.removeprefix("In summary,")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    args = parser.parse_args(argv)
    client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key or "EMPTY")
    summary = tip_suggestion(client, args.model, "staying healthy")
    print("In summary, " + summary.strip())
    return summary


if __name__ == "__main__":
    main()
