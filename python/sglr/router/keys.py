"""The routing key of an API request body: what the router matches against its prefix trees.

Token ids when the request carries them (`input_ids`, or an OpenAI `prompt` of ids; as an
`array('I')`, or a u32 numpy array when `scan_ids_request` read them from the raw body: the
router hands either to its trees as a u32 buffer), else the prompt's text (the router does not
tokenize; a shared text prefix is a shared token prefix).
Chat requests key on their messages in order, role then content, so a conversation's next turn
extends the key of the turn before. A batch keys on its first prompt. A body the router cannot
read keys to "" (the worker answers it with the proper error).

A request for a LoRA adapter keys apart from the base model's and every other adapter's
(`with_adapter`): the worker caches a prefix per adapter, so the router's trees must too. The
adapter is the body's `lora_path` (a batch's first entry), else on the OpenAI routes what follows
the last colon of `model` (`"base:adapter"`). A bare `model` is not read: the router cannot tell
the base's name from an adapter's, so such requests key as the base's do.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections.abc import Callable, Sequence
from typing import Any

Key = Sequence[int] | str
# The generation routes: the ones whose bodies route by key (the rest go to the admin app).
GENERATION_PATHS = ("/generate", "/v1/completions", "/v1/chat/completions")
# The prefix trees hold u32 ids; anything else is not a valid token id anyway.
_U32 = "I" if array("I").itemsize == 4 else "L"
_INT_ONLY = {int}
# From this many ids on, bools are ruled out by finding the 0s and 1s in the array (a fixed
# ~2 us) rather than by the type of every id (~18 ns each).
_SCAN_MIN_IDS = 128
_scan_id_prompt: Callable[[bytes, str], tuple[Any, bool] | None] | None = None
# An adapter's id keys start with two ids above any vocabulary (tokens are < 2**31).
_ADAPTER_ID_BIT = 0x80000000
# In a raw body: a `model` string (escapes included) that holds a colon, so may name an adapter.
_MODEL_WITH_COLON = re.compile(rb'"model"\s*:\s*"(?:[^"\\:]|\\.)*:')
_OPENAI_PATHS = ("/v1/completions", "/v1/chat/completions")


def routing_key(path: str, body: Any) -> Key:
    if not isinstance(body, dict):
        return ""
    if path == "/v1/chat/completions":
        key: Key = _chat_key(body.get("messages"))
    elif path == "/v1/completions":
        key = _prompt_key(body.get("prompt"))
    else:
        ids = _prompt_key(body.get("input_ids"))
        key = ids if ids else _prompt_key(body.get("text"))
    return with_adapter(key, request_adapter(path, body))


def request_adapter(path: str, body: dict[str, Any]) -> str | None:
    """The LoRA adapter a parsed request body names for routing (None: the base model)."""
    lora_path = body.get("lora_path")
    if isinstance(lora_path, list):
        lora_path = lora_path[0] if lora_path else None
    if isinstance(lora_path, str):
        return lora_path or None
    model = body.get("model")
    if path in _OPENAI_PATHS and isinstance(model, str) and ":" in model:
        return model.rpartition(":")[2] or None
    return None


def with_adapter(key: Key, adapter: str | None) -> Key:
    """`key` in the adapter's own key space: text behind the adapter's name, ids behind two ids
    drawn from its name that no token has (None: the base model's, `key` itself)."""
    if not adapter:
        return key
    if isinstance(key, str):
        return f"\x00{adapter}\x00{key}"
    digest = hashlib.blake2b(adapter.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    marker = [int.from_bytes(digest[at : at + 4], "little") | _ADAPTER_ID_BIT for at in (0, 4)]
    return array(_U32, marker) + key if isinstance(key, array) else [*marker, *key]


def scan_ids_request(path: str, body: bytes) -> tuple[Key, bool] | None:
    """`(key, wants_stream)` of a raw JSON body whose prompt is a plain list of token ids, read
    in Rust from the bytes: no Python int per id, nothing built for the rest of the body. None for
    any other body (parse it, then `routing_key`); when it answers, the answer is what that gives
    (`rust/router/src/id_prompt.rs`). The ids come as a u32 numpy array the trees read in place."""
    if path == "/v1/chat/completions" or _may_name_adapter(path, body):
        return None
    global _scan_id_prompt
    if _scan_id_prompt is None:  # imported on first use, then kept: an import per call costs
        from sglr._core import scan_id_prompt

        _scan_id_prompt = scan_id_prompt
    return _scan_id_prompt(body, "prompt" if path == "/v1/completions" else "input_ids")


def _may_name_adapter(path: str, body: bytes) -> bool:
    """Whether the raw body may name a LoRA adapter (then it is parsed: the scan reads only the
    prompt). `\\u` escapes could spell a key's letters, so a body with any is parsed too."""
    if b'"lora_path"' in body or b"\\u" in body:
        return True
    return path in _OPENAI_PATHS and _MODEL_WITH_COLON.search(body) is not None


def _prompt_key(prompt: Any) -> Key:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt:
        first = prompt[0]
        if isinstance(first, (str, list)):
            return _prompt_key(first)
        return _ids_key(prompt)
    return ""


def _ids_key(prompt: list[Any]) -> Key:
    """Checked in C (a per-token Python check cost more than the routing decision, and a list
    would be converted again on each call into the trees): the u32 array refuses anything but
    ints in [0, 2**32); bools, which it takes as 0 / 1, are refused by type."""
    try:
        ids = array(_U32, prompt)
    except (TypeError, OverflowError):
        return ""
    if len(ids) < _SCAN_MIN_IDS:
        return ids if set(map(type, prompt)) == _INT_ONLY else ""
    import numpy as np

    # Only a 0 or a 1 can have been a bool: the types of those alone are looked at.
    for at in np.flatnonzero(np.frombuffer(ids, dtype=np.uint32) <= 1).tolist():
        if type(prompt[at]) is bool:
            return ""
    return ids


def _chat_key(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        parts.append(str(message.get("role", "")))
        parts.append("\n")
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                str(part.get("text", "")) for part in content if isinstance(part, dict) and "text" in part
            )
        parts.append("\n")
    return "".join(parts)
