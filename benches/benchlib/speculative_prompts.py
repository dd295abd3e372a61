"""The chat prompts of `speculative_cpu.py`: copy-heavy programs and free generation.

Every workload builds `n` distinct prompts deterministically (prompt `i` combines the i-th name,
place and topic), so a batch of 16 holds 16 different requests and two runs see the same ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

NAMES = [
    "Amara Okafor", "Lukas Brandt", "Mei Tanaka", "Diego Alvarez", "Freya Lindqvist",
    "Omar Haddad", "Priya Raman", "Tomasz Nowak", "Ines Duarte", "Kofi Mensah",
    "Sofia Rossi", "Arjun Mehta", "Hana Kim", "Mateo Silva", "Elif Yilmaz", "Noah Bennett",
]  # fmt: skip
PLACES = [
    "Lisbon", "Nairobi", "Osaka", "Quito", "Tromso", "Marrakesh", "Hobart", "Krakow",
    "Valparaiso", "Accra", "Tallinn", "Cusco", "Hanoi", "Reykjavik", "Perth", "Halifax",
]  # fmt: skip
JOBS = ["nurse", "carpenter", "teacher", "pilot", "baker", "architect", "chemist", "librarian"]
HOBBIES = ["chess", "sailing", "pottery", "birdwatching", "cycling", "painting", "gardening", "rowing"]

PASSAGES = [
    "{name} opened the bakery in {place} at five every morning. The ovens were already warm, the "
    "flour sacks stood in a neat row by the door, and the first loaves of rye went in before the "
    "street lamps switched off.",
    "The museum in {place} keeps a small room of old maps. {name}, who has looked after it for "
    "twelve years, says that visitors always stop at the same one: a hand-drawn chart of the "
    "coast with the rivers painted in blue ink.",
    "When the ferry to {place} was cancelled, {name} waited in the harbor cafe with a cup of tea "
    "and a paperback novel. By noon the wind had dropped, the captain rang the bell, and the "
    "passengers walked back down the pier.",
    "Every spring the town of {place} holds a market in the old square. {name} sells honey from "
    "forty hives there, in jars with hand-written labels, and usually runs out before the church "
    "clock strikes two.",
    "The night train from {place} leaves at eleven and arrives just after dawn. {name} likes the "
    "sleeper cabin best: a narrow bed, a reading lamp, and a window that shows the mountains "
    "turning pink in the first light.",
    "{name} keeps a garden behind the library in {place}. There are tomatoes along the fence, "
    "three rows of beans, a bench under an apple tree, and a sign asking visitors to pick only "
    "what they will eat today.",
    "The radio station in {place} broadcasts the weather at seven, noon and six. {name} reads it "
    "in a calm, slow voice, then plays one song chosen by a listener and ends with the tide times "
    "for the week.",
    "On the first Sunday of the month, {name} repairs bicycles for free outside the town hall of "
    "{place}. People bring flat tyres, loose chains and squeaking brakes, and most of them leave "
    "with a wheel that runs true again.",
]

FUNCTIONS = [
    ("total", "running_sum", "def sum_prices(items):\n    total = 0\n    for item in items:\n"
     "        total += item.price * item.quantity\n    return total\n"),
    ("count", "num_matches", "def count_words(text, word):\n    count = 0\n"
     "    for token in text.split():\n        if token.lower() == word.lower():\n"
     "            count += 1\n    return count\n"),
    ("result", "squares", "def square_all(numbers):\n    result = []\n    for n in numbers:\n"
     "        result.append(n * n)\n    return result\n"),
    ("best", "longest", "def longest_name(names):\n    best = ''\n    for name in names:\n"
     "        if len(name) > len(best):\n            best = name\n    return best\n"),
]  # fmt: skip

ANSWERS = [
    "Here is a simple plan for a morning routine:\n1. Wake up at 7 and drink a glass of water.\n"
    "2. Stretch for ten minutes.\n3. Eat a breakfast of oats and fruit.\n"
    "4. Write down the three most important tasks of the day.\n5. Take a short walk outside.",
    "To make a cup of green tea:\n1. Heat the water to about 80 degrees.\n"
    "2. Put one teaspoon of leaves in the pot.\n3. Pour the water over the leaves.\n"
    "4. Wait two minutes.\n5. Pour the tea into a cup and enjoy it warm.",
    "Tips for packing a small suitcase:\n1. Make a list before you start.\n"
    "2. Roll your clothes instead of folding them.\n3. Put shoes at the bottom.\n"
    "4. Keep liquids in a clear bag.\n5. Leave some space for things you buy on the trip.",
    "How to start learning to draw:\n1. Buy a pencil and a cheap sketchbook.\n"
    "2. Draw simple shapes every day.\n3. Copy objects you see on your desk.\n"
    "4. Pay attention to light and shadow.\n5. Keep your old drawings to see your progress.",
]

QUESTIONS = [
    "Why is the sky blue?", "How do airplanes stay in the air?", "What causes the seasons?",
    "Why do cats purr?", "How does a refrigerator keep food cold?", "Why do leaves change color in autumn?",
    "What makes a good friend?", "How do bees make honey?", "Why is sleep important?",
    "How does the internet work?", "Why do we have tides?", "What is the best way to learn a language?",
    "How do volcanoes form?", "Why is exercise good for the brain?", "How does a compass work?",
    "What makes bread rise?",
]  # fmt: skip
STORY_HEROES = ["a lighthouse keeper", "a young dragon", "a lost robot", "an old fisherman"]
STORY_EVENTS = ["finds a secret door", "learns to sing", "makes an unlikely friend", "gets lost in a storm"]

PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 30},
        "occupation": {"type": "string", "maxLength": 30},
        "hobby": {"type": "string", "maxLength": 30},
    },
    "required": ["name", "age", "city", "occupation", "hobby"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Prompt:
    messages: list[dict[str, str]]
    json_schema: str | None = None  # the sampling param, a JSON string


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def passage(i: int) -> str:
    return PASSAGES[i % len(PASSAGES)].format(name=NAMES[i % len(NAMES)], place=PLACES[i % len(PLACES)])


def person_paragraph(i: int) -> str:
    name, place = NAMES[i % len(NAMES)], PLACES[(i + 5) % len(PLACES)]
    job, hobby, age = JOBS[i % len(JOBS)], HOBBIES[(i + 3) % len(HOBBIES)], 24 + (i * 7) % 50
    return (
        f"{name} is {age} years old and works as a {job} in {place}. On weekends, "
        f"{name.split()[0]} spends most of the time on {hobby}, and says it is the best way to relax "
        f"after a long week."
    )


def quote(i: int) -> Prompt:
    return Prompt(_user(f"Repeat the following passage exactly, word for word:\n\n{passage(i)}"))


def json_free(i: int) -> Prompt:
    return Prompt(
        _user(
            "Extract the person's name, age, city, occupation and hobby from the paragraph below. "
            "Answer with a JSON object with the keys name, age, city, occupation and hobby, and "
            f"nothing else.\n\n{person_paragraph(i)}"
        )
    )


def json_schema(i: int) -> Prompt:
    return Prompt(json_free(i).messages, json.dumps(PERSON_SCHEMA))


def chat_repeat(i: int) -> Prompt:
    name, place = NAMES[i % len(NAMES)], PLACES[i % len(PLACES)]
    answer = ANSWERS[i % len(ANSWERS)]
    return Prompt(
        [
            {"role": "user", "content": f"Hi, I am {name} from {place}. Can you give me a short list?"},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "Thanks! What is the capital of France?"},
            {"role": "assistant", "content": "The capital of France is Paris."},
            {"role": "user", "content": "Please repeat your first list again, exactly as you wrote it."},
        ]
    )


def code_edit(i: int) -> Prompt:
    old, new, code = FUNCTIONS[i % len(FUNCTIONS)]
    # Prompt i > 3 renames to a numbered variant, so that batch 16 holds 16 distinct requests.
    new = new if i < len(FUNCTIONS) else f"{new}_{i // len(FUNCTIONS)}"
    return Prompt(
        _user(
            f"Here is a Python function:\n\n```python\n{code}```\n\nRewrite it with the variable "
            f"`{old}` renamed to `{new}`. Keep everything else the same and return the full code."
        )
    )


def open_question(i: int) -> Prompt:
    return Prompt(_user(QUESTIONS[i % len(QUESTIONS)] + " Explain in a few paragraphs."))


def story(i: int) -> Prompt:
    hero, event = (
        STORY_HEROES[i % len(STORY_HEROES)],
        STORY_EVENTS[(i // len(STORY_HEROES)) % len(STORY_EVENTS)],
    )
    return Prompt(_user(f"Write a short story about {hero} named {NAMES[i % len(NAMES)]} who {event}."))


# name -> (kind, builder)
WORKLOADS = {
    "quote passage": ("copy", quote),
    "JSON extract": ("copy", json_free),
    "JSON extract + schema": ("copy", json_schema),
    "chat repeat": ("copy", chat_repeat),
    "code edit": ("copy", code_edit),
    "open questions": ("free", open_question),
    "short story": ("free", story),
}


def build(workload: str, n: int) -> list[Prompt]:
    _, builder = WORKLOADS[workload]
    return [builder(i) for i in range(n)]
