"""sglr: a fast, programmable LLM system (an LM-program DSL co-designed with a serving runtime).

This module exports the public API only; importing it has no side effects.
"""

import importlib

from sglr.errors import (
    InvariantError,
    LengthMismatchError,
    RadixError,
    SglrError,
    StaleNodeError,
    UnknownNodeError,
    UnlockError,
)

# The language (`import sglr as sgl`): stdlib-only modules, so importing them is cheap.
from sglr.lang.api import (
    assistant,
    assistant_begin,
    assistant_end,
    flush_cache,
    function,
    gen,
    gen_int,
    gen_string,
    get_server_info,
    image,
    select,
    set_default_backend,
    system,
    system_begin,
    system_end,
    user,
    user_begin,
    user_end,
    video,
)
from sglr.lang.choices import (
    greedy_token_selection,
    token_length_normalized,
    unconditional_likelihood_normalized,
)
from sglr.lang.global_config import global_config
from sglr.version import __version__ as __version__

# Backends import their HTTP clients (and the engine, torch) only when first used (see __getattr__).
_LAZY_BACKENDS = {
    "Engine": "sglr.engine.engine",
    "RuntimeEndpoint": "sglr.lang.backend.runtime_endpoint",
    "Runtime": "sglr.lang.backend.runtime",
    "OpenAI": "sglr.lang.backend.openai_backend",
    "BaseBackend": "sglr.lang.backend.base",
}


def __getattr__(name: str):
    if name in _LAZY_BACKENDS:
        return getattr(importlib.import_module(_LAZY_BACKENDS[name]), name)
    raise AttributeError(f"module 'sglr' has no attribute {name!r}")


__all__ = [
    "BaseBackend",
    "Engine",
    "InvariantError",
    "LengthMismatchError",
    "OpenAI",
    "RadixError",
    "Runtime",
    "RuntimeEndpoint",
    "SglrError",
    "StaleNodeError",
    "UnknownNodeError",
    "UnlockError",
    "assistant",
    "assistant_begin",
    "assistant_end",
    "flush_cache",
    "function",
    "gen",
    "gen_int",
    "gen_string",
    "get_server_info",
    "global_config",
    "greedy_token_selection",
    "image",
    "select",
    "set_default_backend",
    "system",
    "system_begin",
    "system_end",
    "token_length_normalized",
    "unconditional_likelihood_normalized",
    "user",
    "user_begin",
    "user_end",
    "video",
]
