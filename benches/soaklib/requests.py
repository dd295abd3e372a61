"""What the soak sends: well-formed requests of every kind the servers take (native and OpenAI,
streamed and not, constrained, tools, images), and bad ones (malformed, hostile, oversized)
that must be refused with a 4xx and an error body, never a 5xx.

A `Call` is one HTTP request: its method, path, body (JSON or raw bytes) and whether it
streams; the client (`traffic.py`) sends it and judges the answer.
"""

from __future__ import annotations

import base64
import io
import json
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

WORDS = [
    "the",
    "a",
    "of",
    "to",
    "in",
    "and",
    "is",
    "was",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "an",
    "be",
    "this",
    "which",
    "or",
    "from",
    "it",
]
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 12}},
            "required": ["city"],
        },
    },
}


@dataclass
class Call:
    kind: str
    path: str
    body: Any = None  # JSON-encodable, or bytes sent as they are
    stream: bool = False
    bad: bool = False  # a 4xx with an error body is the right answer
    content_type: str = "application/json"

    def content(self) -> bytes:
        return self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()


# The LoRA adapter every soak server loads at start (`--lora-paths`).
SOAK_ADAPTER = "soak-adapter"


def _prompt(rng: random.Random, num_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(num_words))


def _image_url(rng: random.Random) -> str:
    from PIL import Image

    pixels = np.random.default_rng(rng.randrange(1 << 30)).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _sampling(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.5:
        return {"temperature": 0.0}
    return {"temperature": rng.uniform(0.3, 1.2), "top_p": rng.uniform(0.5, 1.0), "seed": rng.randrange(1000)}


def good_call(rng: random.Random, shared_prefix: str) -> Call:
    """One well-formed request of a random kind; half of them share a long prefix (cache hits)."""
    text = (shared_prefix if rng.random() < 0.5 else "") + _prompt(rng, rng.randrange(3, 60))
    max_new = rng.randrange(1, 24)
    stream = rng.random() < 0.5
    kind = rng.choice(
        ["native", "native", "chat", "chat", "completions", "regex", "json", "tools", "image", "lora"]
    )
    sampling = _sampling(rng)
    messages = [{"role": "user", "content": text}]
    chat = {"model": "default", "messages": messages, "max_tokens": max_new, "stream": stream, **sampling}
    if kind == "native":
        body = {"text": text, "sampling_params": {"max_new_tokens": max_new, **sampling}, "stream": stream}
        return Call("native", "/generate", body, stream)
    if kind == "chat":
        return Call("chat", "/v1/chat/completions", chat, stream)
    if kind == "completions":
        body = {"model": "default", "prompt": text, "max_tokens": max_new, "stream": stream, **sampling}
        return Call("completions", "/v1/completions", body, stream)
    if kind == "regex":
        params = {"max_new_tokens": 16, "regex": r"(yes|no)-[0-9]{1,3}", **sampling}
        return Call("regex", "/generate", {"text": text, "sampling_params": params, "stream": stream}, stream)
    if kind == "json":
        schema = {"name": "person", "schema": PERSON}
        body = {**chat, "max_tokens": 64, "response_format": {"type": "json_schema", "json_schema": schema}}
        return Call("json", "/v1/chat/completions", body, stream)
    if kind == "lora":  # the soak's adapter (`SOAK_ADAPTER`), by the native field or the model name
        if rng.random() < 0.5:
            params = {"max_new_tokens": max_new, **sampling}
            body = {"text": text, "sampling_params": params, "stream": stream, "lora_path": SOAK_ADAPTER}
            return Call("lora", "/generate", body, stream)
        return Call("lora", "/v1/chat/completions", {**chat, "model": SOAK_ADAPTER}, stream)
    if kind == "tools":
        body = {**chat, "max_tokens": 64, "tools": [WEATHER_TOOL], "tool_choice": "required"}
        return Call("tools", "/v1/chat/completions", body, stream)
    content = [
        {"type": "text", "text": text[:80]},
        {"type": "image_url", "image_url": {"url": _image_url(rng)}},
    ]
    body = {**chat, "messages": [{"role": "user", "content": content}]}
    return Call("image", "/v1/chat/completions", body, stream)


def bad_call(rng: random.Random, context_len: int, max_body_bytes: int) -> Call:
    """One request the servers must refuse with a 4xx."""
    kind = rng.choice(
        ["not-json", "json-array", "wrong-type", "out-of-range", "deep-nesting", "bad-unicode",
         "over-context", "over-body-limit", "bad-image", "bad-regex", "unknown-field", "unknown-adapter",
         "empty"]
    )  # fmt: skip
    chat = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    native = {"text": "hi", "sampling_params": {"max_new_tokens": 4}}
    if kind == "not-json":
        return Call(kind, "/generate", b'{"text": "hi", "sampling_params": {', bad=True)
    if kind == "json-array":
        return Call(kind, "/v1/chat/completions", b"[1, 2, 3]", bad=True)
    if kind == "wrong-type":
        return Call(kind, "/v1/chat/completions", {**chat, "max_tokens": "ten"}, bad=True)
    if kind == "out-of-range":
        return Call(kind, "/generate", {**native, "sampling_params": {"temperature": -3.0}}, bad=True)
    if kind == "deep-nesting":
        depth = rng.randrange(2_000, 50_000)
        return Call(
            kind, "/v1/completions", ('{"prompt": ' + "[" * depth + "]" * depth + "}").encode(), bad=True
        )
    if kind == "bad-unicode":
        return Call(kind, "/generate", b'{"text": "\xff\xfe\xfa bad bytes"}', bad=True)
    if kind == "over-context":
        long_text = " ".join(["word"] * (context_len * 2))
        return Call(
            kind, "/v1/completions", {"model": "default", "prompt": long_text, "max_tokens": 4}, bad=True
        )
    if kind == "over-body-limit":
        return Call(kind, "/generate", {"text": "x" * (max_body_bytes + 10)}, bad=True)
    if kind == "bad-image":
        image = "data:image/png;base64," + base64.b64encode(b"not an image at all").decode()
        content = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": image}}]
        return Call(kind, "/v1/chat/completions", {**chat, "messages": [{"role": "user", "content": content}]}, bad=True)  # fmt: skip
    if kind == "bad-regex":
        return Call(kind, "/generate", {**native, "sampling_params": {"regex": "(unclosed"}}, bad=True)
    if kind == "unknown-adapter":
        return Call(kind, "/generate", {**native, "lora_path": "no-such-adapter"}, bad=True)
    if kind == "unknown-field":
        return Call(kind, "/generate", {**native, "sampling_params": {"max_new_tokenz": 3}}, bad=True)
    return Call(kind, "/v1/chat/completions", b"", bad=True)
