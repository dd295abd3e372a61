"""The fields of a native (`/generate`-shaped) request for a `gen`, shared by every backend that
speaks the native API: `RuntimeEndpoint` sends them over HTTP, `EngineBackend` hands them to the
in-process engine. Building them in one place keeps the two paths identical."""

from __future__ import annotations

from typing import Any

from sglr.errors import BackendError
from sglr.lang.gen_params import GenParams

# The native request keys that are request-level (beside `sampling_params`, not inside it).
LOGPROB_KEYS = ("return_logprob", "logprob_start_len", "top_logprobs_num", "return_text_in_logprobs")


def native_sampling_params(params: GenParams) -> dict[str, Any]:
    """The `sampling_params` object of a native request (`dtype` lowered to a regex and stops)."""
    if params.tools is not None:
        raise BackendError(
            "gen(tools=...) needs a chat-completions backend: use sgl.OpenAI(model, base_url=<server>/v1) "
            "(sglr-server's /v1/chat/completions renders the tools with the model's chat template)"
        )
    regex, stop = params.regex_and_stop()
    return {
        "skip_special_tokens": True,
        "spaces_between_special_tokens": True,
        "max_new_tokens": params.max_new_tokens,
        "min_new_tokens": params.min_new_tokens,
        "n": params.n,
        "stop": list(stop),
        "stop_token_ids": list(params.stop_token_ids),
        "stop_regex": list(params.stop_regex),
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "min_p": params.min_p,
        "frequency_penalty": params.frequency_penalty,
        "presence_penalty": params.presence_penalty,
        "ignore_eos": params.ignore_eos,
        "regex": regex,
        "json_schema": params.json_schema,
        "ebnf": params.ebnf,
        # Only when set: a request without one stays as SGLang's native clients send it.
        **({} if params.structural_tag is None else {"structural_tag": params.structural_tag}),
        **params.extra,
    }


def native_logprob_fields(params: GenParams) -> dict[str, Any]:
    """The request-level logprob keys of a native request (only those that are set)."""
    return {key: getattr(params, key) for key in LOGPROB_KEYS if getattr(params, key) is not None}


def native_request_fields(params: GenParams) -> dict[str, Any]:
    """The request-level keys of a native request beside `sampling_params`: the logprob ones,
    `lora_path` and `priority` (only those that are set)."""
    priority = {} if params.priority is None else {"priority": params.priority}
    return {**native_logprob_fields(params), **adapter_fields(params.lora_path), **priority}


def run_adapter(s: Any) -> str | None:
    """The LoRA adapter of the run the prompt state `s` belongs to (None: the base model)."""
    return getattr(getattr(s, "default_sampling_params", None), "lora_path", None)


def adapter_fields(lora_path: str | None) -> dict[str, Any]:
    """`lora_path` for a request the program sends besides its `gen`s (a `select`'s scoring, a
    cache hint): the run's adapter, so what it scores and caches is that adapter's."""
    return {} if lora_path is None else {"lora_path": lora_path}
