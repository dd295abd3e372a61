"""Multi-turn chat: every turn extends the same conversation, so the engine (or server) reuses
the KV cache of the earlier turns instead of prefilling the history again.

    python examples/multi_turn_chat.py [--backend engine --model-path PATH]
"""

from __future__ import annotations

import sglr as sgl
from lang_backends import example_args

SYSTEM = "You are a helpful assistant. Keep answers short."
TURNS = [
    "What is the capital of France?",
    "What is the capital of Germany?",
    "What is 2 + 3?",
]


@sgl.function
def multi_turn_chat(s, turns, system=SYSTEM):
    s += sgl.system(system)
    for index, question in enumerate(turns):
        s += sgl.user(question)
        s += sgl.assistant(sgl.gen(f"answer_{index}", max_tokens=48))


def main(argv=None) -> list[dict]:
    _, backend = example_args(__doc__, argv)
    state = multi_turn_chat.run(turns=TURNS, backend=backend, temperature=0)
    for message in state.messages():
        print(f"{message['role']}: {message['content']}")
    return state.messages()


if __name__ == "__main__":
    main()
