"""Tip suggestion (skeleton-of-thought): the model writes a skeleton of three tips in one
assistant turn, each tip is expanded by a nested program call (all in parallel), and the
expansions are merged into a summary.

    python examples/tip_suggestion.py --backend openai --base-url http://127.0.0.1:30000/v1
"""

from __future__ import annotations

import sglr as sgl
from lang_backends import example_args


@sgl.function(num_api_spec_tokens=128)
def expand_tip(s, topic, tip):
    s += sgl.user(f"Expand this tip about {topic} into one short paragraph: {tip}")
    s += sgl.assistant(sgl.gen("paragraph", max_tokens=256))


@sgl.function(num_api_spec_tokens=128)
def tip_suggestion(s, topic):
    s += sgl.system("You are a helpful assistant who gives useful tips.")
    s += sgl.user(f"Give three short tips about {topic}, numbered, one per line.")
    with s.assistant():
        for i in range(1, 4):
            s += f"{i}." + sgl.gen(f"tip_{i}", max_tokens=32, stop="\n") + "\n"
    expansions = [expand_tip(topic=topic, tip=s[f"tip_{i}"]) for i in range(1, 4)]  # run in parallel
    s += sgl.user("Summarize these expanded tips:\n" + "\n".join(e["paragraph"] for e in expansions))
    s += sgl.assistant("In summary," + sgl.gen("summary", max_tokens=256))


def main(argv=None) -> str:
    _, backend = example_args(__doc__, argv)
    state = tip_suggestion.run(topic="staying healthy", backend=backend, temperature=0)
    print("In summary, " + state["summary"].strip())
    return state["summary"]


if __name__ == "__main__":
    main()
