"""Whole-object JSON with long constant keys (the jump-forward showcase): one `gen` constrained by a
JSON schema whose property names are long; once a key's opening quote is out, the rest of the key
is forced, and jump-forward appends it in one extend instead of one decode step per token."""

from __future__ import annotations

import random

import sglr as sgl
from workloads.base import GREEDY, ProgramWorkload, sized
from workloads.synthetic import name, words

SIZES = {
    "smoke": {"num_requests": 3, "description_words": 30},
    "cpu": {"num_requests": 16, "description_words": 120},
    "gpu": {"num_requests": 256, "description_words": 200},
}
PROPERTIES = {
    "full_name_of_the_character_as_written_in_the_story": {"type": "string", "maxLength": 24},
    "age_of_the_character_in_years_at_the_start_of_the_story": {
        "type": "integer",
        "minimum": 0,
        "maximum": 120,
    },
    "home_city_or_village_where_the_character_grew_up": {"type": "string", "maxLength": 24},
    "main_occupation_of_the_character_during_the_story": {"type": "string", "maxLength": 24},
    "whether_the_character_survives_until_the_final_chapter": {"type": "boolean"},
}
SCHEMA = {
    "type": "object",
    "properties": PROPERTIES,
    "required": list(PROPERTIES),
    "additionalProperties": False,
}


@sgl.function
def character_record(s, description):
    s += "Describe the character below as a JSON object.\n\n" + description + "\n\nJSON:"
    s += sgl.gen("record", max_tokens=256, json_schema=SCHEMA)


def build(profile: str, seed: int, vocab_size: int) -> ProgramWorkload:
    size = sized(SIZES, profile)
    rng = random.Random(seed)
    arguments = [
        {"description": f"{name(rng)} is a character. " + words(rng, size.description_words)}
        for _ in range(size.num_requests)
    ]
    return ProgramWorkload(
        "json-schema", character_record, arguments, dict(GREEDY), plain_generation=False, constrained=True
    )
