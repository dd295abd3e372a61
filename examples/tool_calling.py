"""Tool calling (OpenAI `tools`): the model calls a function whose arguments are constrained to
its parameter schema, and the program runs the function with those arguments.
Needs a chat-completions backend (sglr-server's OpenAI API, or any OpenAI-compatible server).

    sglr-server --port 30000 &
    python examples/tool_calling.py --backend openai --base-url http://127.0.0.1:30000/v1 --model default
"""

from __future__ import annotations

import json

import sglr as sgl
from lang_backends import example_args

GET_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 20},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}


def get_weather(city: str, unit: str) -> dict:
    return {"city": city, "temperature": 21 if unit == "celsius" else 70, "unit": unit, "sky": "sunny"}


@sgl.function
def ask_weather(s, city):
    s += sgl.user(f"What is the weather in {city} right now?")
    s += sgl.assistant(sgl.gen("call", tools=[GET_WEATHER], tool_choice="required", max_tokens=64))


def main(argv=None) -> dict:
    _, backend = example_args(__doc__, argv)
    state = ask_weather.run(city="Paris", backend=backend, temperature=0)
    (call,) = state.get_meta_info("call")["tool_calls"][:1]
    arguments = json.loads(call["function"]["arguments"])
    result = get_weather(**arguments)
    print(f"call: {call['function']['name']}({json.dumps(arguments)}) -> {json.dumps(result)}")
    return {"name": call["function"]["name"], "arguments": arguments, "result": result}


if __name__ == "__main__":
    main()
