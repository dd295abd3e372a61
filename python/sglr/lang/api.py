"""The primitives of the language: what `import sglr as sgl` exposes for writing LM programs."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from sglr.lang import ir
from sglr.lang.backend_resolution import resolve_backend, wrap_engine
from sglr.lang.choices import ChoicesSamplingMethod, token_length_normalized
from sglr.lang.dtype_constraints import dtype_name
from sglr.lang.gen_params import GEN_PARAM_FIELDS, GenParams
from sglr.lang.global_config import global_config
from sglr.lang.program import Program


def function(func: Callable[..., Any] | None = None, num_api_spec_tokens: int | None = None) -> Any:
    """Decorator: `@function` or `@function(num_api_spec_tokens=N)` turns `def f(s, ...)` into a
    `Program` (run it with `f.run(...)`, `f(...)`, `f.run_batch([...])`)."""
    if func is not None:
        return Program(func, num_api_spec_tokens)
    return lambda f: Program(f, num_api_spec_tokens)


def gen(
    name: str | None = None,
    max_tokens: int | None = None,
    min_tokens: int | None = None,
    n: int | None = None,
    stop: str | Sequence[str] | None = None,
    stop_token_ids: Sequence[int] | None = None,
    stop_regex: str | Sequence[str] | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    frequency_penalty: float | None = None,
    presence_penalty: float | None = None,
    ignore_eos: bool | None = None,
    return_logprob: bool | None = None,
    logprob_start_len: int | None = None,
    top_logprobs_num: int | None = None,
    return_text_in_logprobs: bool | None = None,
    dtype: Any = None,
    choices: Sequence[str] | None = None,
    choices_method: ChoicesSamplingMethod | None = None,
    regex: str | None = None,
    json_schema: str | dict | None = None,
    ebnf: str | None = None,
    structural_tag: str | dict | None = None,
    tools: Sequence[dict] | None = None,
    tool_choice: str | dict | None = None,
    lora_path: str | None = None,
) -> ir.Expr:
    """Generates text into variable `name` (unset values come from `run(...)` defaults).

    With `choices`, this is `select(name, choices, ...)`. `regex`, `json_schema`, `ebnf` (an
    EBNF / GBNF grammar), `structural_tag` (SGLang's: free text whose segments opened by a
    trigger follow a schema; a dict or JSON text) and `dtype` (int/float/str/bool) constrain the
    output on backends that support constrained decoding.

    `tools` (OpenAI function tools) and `tool_choice` ("auto", "none", "required" or
    `{"type": "function", "function": {"name": ...}}`) let the model call functions, on
    chat-completions backends (`sgl.OpenAI`, also against sglr-server): the variable gets the
    reply's text (empty when it only called tools) and `get_meta_info(name)["tool_calls"]` the
    calls, OpenAI-shaped (`id`, `type`, `function.name`, `function.arguments` as JSON text).

    `lora_path` generates with that LoRA adapter (by name, as the engine or server loaded it);
    `run(..., lora_path=...)` sets it for every `gen`, `select` and cache hint of the program.
    """
    if choices is not None:
        return select(
            name,
            choices,
            temperature=0.0 if temperature is None else temperature,
            choices_method=choices_method or token_length_normalized,
        )
    given = dict(locals())
    overrides = {GEN_PARAM_FIELDS[key]: given[key] for key in GEN_PARAM_FIELDS if given.get(key) is not None}
    if "dtype" in overrides:
        overrides["dtype"] = dtype_name(overrides["dtype"])
        if regex is not None:
            warnings.warn("Both dtype and regex are set. Only dtype will be used.", stacklevel=2)
            overrides.pop("regex")
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ValueError(f"gen({name!r}): invalid regex {regex!r}: {exc}") from exc
    for key in ("json_schema", "structural_tag"):
        if isinstance(overrides.get(key), dict):
            overrides[key] = json.dumps(overrides[key])
    if "tools" in overrides:
        overrides["tools"] = json.dumps(list(overrides["tools"]))
    if "tool_choice" in overrides:
        overrides["tool_choice"] = json.dumps(overrides["tool_choice"])
    for key in ("stop", "stop_regex"):
        if isinstance(overrides.get(key), (list, tuple)):
            overrides[key] = list(overrides[key])
    # Validate now, so a bad value fails at the user's line rather than inside the worker.
    GenParams().merged(**overrides)
    return ir.Gen(name, overrides)


def _gen_typed(dtype: type, name: str | None, **kwargs: Any) -> ir.Expr:
    return gen(name, dtype=dtype, **kwargs)


def gen_int(name: str | None = None, max_tokens: int | None = None, **kwargs: Any) -> ir.Expr:
    """`gen` constrained to an integer (`dtype=int`)."""
    if "min_tokens" in kwargs:
        raise TypeError("gen_int() does not take min_tokens")
    return _gen_typed(int, name, max_tokens=max_tokens, **kwargs)


def gen_string(name: str | None = None, max_tokens: int | None = None, **kwargs: Any) -> ir.Expr:
    """`gen` constrained to a double-quoted string (`dtype=str`)."""
    if "min_tokens" in kwargs:
        raise TypeError("gen_string() does not take min_tokens")
    return _gen_typed(str, name, max_tokens=max_tokens, **kwargs)


def select(
    name: str | None = None,
    choices: Sequence[str] | None = None,
    temperature: float = 0.0,
    choices_method: ChoicesSamplingMethod = token_length_normalized,
) -> ir.Select:
    """Picks the most likely of `choices` (by `choices_method`) into variable `name`."""
    if not choices:
        raise ValueError("select() needs a non-empty list of choices")
    if not all(isinstance(choice, str) for choice in choices):
        raise TypeError("select() choices must be strings")
    if not isinstance(choices_method, ChoicesSamplingMethod):
        raise TypeError(f"choices_method must be one of the sgl choice methods, got {choices_method!r}")
    return ir.Select(name, list(choices), temperature, choices_method)


def image(expr: Any) -> ir.Image:
    """An image (file path, bytes or PIL image) placed in the prompt."""
    return ir.Image(expr)


def video(path: Any, num_frames: int = 8) -> ir.Video:
    """A video placed in the prompt: a file (path or bytes; `num_frames` frames sampled evenly,
    decoded with PyAV) or a list of frames (file paths, bytes or PIL images)."""
    if not isinstance(num_frames, int) or num_frames < 1:
        raise ValueError(f"num_frames must be a positive integer, got {num_frames!r}")
    return ir.Video(path, num_frames)


def _role(role: str, expr: Any) -> ir.ExprList:
    if expr is None:
        return ir.ExprList([ir.RoleBegin(role), ir.RoleEnd(role)])
    return ir.ExprList([ir.RoleBegin(role), expr, ir.RoleEnd(role)])


def system(expr: Any = None) -> ir.ExprList:
    """A system turn around `expr` (the chat template's system prefix and suffix)."""
    return _role("system", expr)


def user(expr: Any = None) -> ir.ExprList:
    """A user turn around `expr`."""
    return _role("user", expr)


def assistant(expr: Any = None) -> ir.ExprList:
    """An assistant turn around `expr` (typically a `gen`)."""
    return _role("assistant", expr)


# The two halves of a turn, for prompts that open and close one apart:
# `s += sgl.user_begin() + question + sgl.user_end()`.
system_begin = partial(ir.RoleBegin, "system")
system_end = partial(ir.RoleEnd, "system")
user_begin = partial(ir.RoleBegin, "user")
user_end = partial(ir.RoleEnd, "user")
assistant_begin = partial(ir.RoleBegin, "assistant")
assistant_end = partial(ir.RoleEnd, "assistant")


def set_default_backend(backend: Any) -> None:
    """The backend programs run on when none is passed; an `Engine` is kept as its `EngineBackend`,
    so that `sgl.global_config.default_backend` answers the whole backend protocol."""
    global_config.default_backend = wrap_engine(backend)


def flush_cache(backend: Any = None) -> bool:
    """Flushes the backend's prefix cache; False when there is no backend."""
    backend = backend if backend is not None else global_config.default_backend
    if backend is None:
        return False
    return bool(resolve_backend(backend).flush_cache())


def get_server_info(backend: Any = None) -> dict | None:
    backend = backend if backend is not None else global_config.default_backend
    if backend is None:
        return None
    return resolve_backend(backend).get_server_info()
