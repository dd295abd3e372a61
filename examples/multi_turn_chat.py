"""Multi-turn chat: every turn extends the same conversation, so the server reuses its KV cache.

python examples/multi_turn_chat.py --backend openai --base-url http://127.0.0.1:30000/v1
"""

from __future__ import annotations

import sglr as sgl
from lang_backends import example_args

TURNS = [
    "I want to learn to cook. Where should I start?",
    "Which three dishes should I try first?",
    "Give me a shopping list for the first one.",
]


@sgl.function
def multi_turn_chat(s, turns):
    s += sgl.system("You are a friendly cooking teacher. Keep answers short.")
    for index, question in enumerate(turns):
        s += sgl.user(question)
        s += sgl.assistant(sgl.gen(f"answer_{index}", max_tokens=256))


def main(argv=None) -> list[dict]:
    _, backend = example_args(__doc__, argv)
    state = multi_turn_chat.run(turns=TURNS, backend=backend, temperature=0)
    for message in state.messages():
        print(f"{message['role']}: {message['content']}\n")
    return state.messages()


if __name__ == "__main__":
    main()
