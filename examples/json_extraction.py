"""JSON extraction with a schema: the output is constrained to the JSON schema (on backends with
constrained decoding) and parsed.

    python examples/json_extraction.py [--backend engine --model-path PATH]
"""

from __future__ import annotations

import json

import sglr as sgl
from lang_backends import example_args

CITY_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "country": {"type": "string"},
        "population_millions": {"type": "number"},
        "landmarks": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["name", "country", "population_millions", "landmarks"],
    "additionalProperties": False,
}
DOCUMENT = (
    "Paris, the capital of France, has about 2.1 million inhabitants. Visitors come for the "
    "Eiffel Tower and the Louvre."
)


@sgl.function
def extract_city(s, document):
    s += sgl.user("Extract the city described below as JSON.\n\n" + document)
    s += sgl.assistant(sgl.gen("city", max_tokens=256, json_schema=CITY_SCHEMA))


def main(argv=None) -> dict:
    _, backend = example_args(__doc__, argv)
    city = json.loads(extract_city.run(document=DOCUMENT, backend=backend, temperature=0)["city"])
    print(json.dumps(city, indent=2))
    return city


if __name__ == "__main__":
    main()
