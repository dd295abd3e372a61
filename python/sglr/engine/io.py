"""Normalising `generate` inputs into one spec per sequence, with SGLang's batching rules.

- exactly one of `text` / `input_ids`; a list of strings or a list of id lists is a batch;
- `sampling_params` is one dict for all or one per item; per-item fields broadcast;
- `n > 1` fans each prompt out into n sequences ordered sample-major (all prompts for
  sample 1, then all for sample 2, ...), and makes the result a list; with a `seed`, sample s
  uses `seed + s` so the samples differ yet stay reproducible;
- request ids are unique within a call (generated when not given).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sglr.engine.session_params import SessionParams, parse_session_params
from sglr.errors import InvalidRequestError, SessionError
from sglr.sampling_params import SamplingParams


@dataclass(frozen=True)
class SequenceSpec:
    """One sequence to generate (after batch and `n` expansion)."""

    rid: str
    text: str | None
    input_ids: tuple[int, ...] | None
    params: SamplingParams
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    return_text_in_logprobs: bool = False
    namespace: str | None = None
    # The sequence's images as the caller gave them (paths, URLs, base64, bytes, PIL images).
    image_data: tuple[Any, ...] = ()
    # Its videos: each a file (path or bytes) or a list of frames.
    video_data: tuple[Any, ...] = ()
    # The LoRA adapter it runs with, by name (None: the base model).
    lora_path: str | None = None
    # An embedding request (`Engine.encode`): the prompt runs once, uncached, and its pooled
    # hidden states are the result.
    embed: bool = False
    # Its scheduling priority as the caller gave it (None: none given; `engine/priority.py`).
    priority: int | None = None
    # The session it continues (`engine/sessions.py`; None: none).
    session_params: SessionParams | None = None


@dataclass(frozen=True)
class NormalizedInput:
    specs: list[SequenceSpec]
    is_batch: bool


def normalize_generate_input(
    text: str | list[str] | None = None,
    input_ids: list[int] | list[list[int]] | None = None,
    sampling_params: dict[str, Any] | list[dict[str, Any]] | SamplingParams | None = None,
    rid: str | list[str] | None = None,
    return_logprob: bool | list[bool] | None = None,
    logprob_start_len: int | list[int] | None = None,
    top_logprobs_num: int | list[int] | None = None,
    return_text_in_logprobs: bool = False,
    namespace: str | None = None,
    image_data: Any = None,
    video_data: Any = None,
    lora_path: str | list[str | None] | None = None,
    priority: int | list[int | None] | None = None,
    session_params: dict[str, Any] | SessionParams | None = None,
) -> NormalizedInput:
    if (text is None) == (input_ids is None):
        raise InvalidRequestError("Either text, input_ids or input_embeds should be provided.", param="text")
    prompts, is_batch = _prompts(text, input_ids)
    num_items = len(prompts)
    params = _params_per_item(sampling_params, num_items)
    num_samples = params[0].n
    if any(p.n != num_samples for p in params):
        raise InvalidRequestError(
            "The parallel_sample_num should be the same for all samples in sample params.",
            param="sampling_params",
        )
    want_logprob = _per_item(return_logprob, num_items, "return_logprob", bool, False)
    starts = _per_item(logprob_start_len, num_items, "logprob_start_len", int, -1)
    tops = _per_item(top_logprobs_num, num_items, "top_logprobs_num", int, 0)
    if any(t < 0 for t in tops):
        raise InvalidRequestError("top_logprobs_num must be >= 0.", param="top_logprobs_num")
    images = _images_per_item(image_data, num_items, is_batch, "image_data")
    videos = _images_per_item(video_data, num_items, is_batch, "video_data")
    adapters = _lora_per_item(lora_path, num_items)
    priorities = (
        [None] * num_items if priority is None else _per_item(priority, num_items, "priority", int, 0)
    )
    num_sequences = num_items * num_samples
    session = parse_session_params(session_params)
    if session is not None and num_sequences != 1:
        raise SessionError("a session request has one prompt and n = 1", param="session_params")
    rids = _rids(rid, num_items, num_sequences)
    specs = []
    for sample in range(num_samples):
        for item, prompt in enumerate(prompts):
            index = sample * num_items + item
            specs.append(
                SequenceSpec(
                    rid=rids[index],
                    text=prompt if isinstance(prompt, str) else None,
                    input_ids=None if isinstance(prompt, str) else prompt,
                    params=_single_sample(params[item], sample),
                    return_logprob=want_logprob[item],
                    logprob_start_len=starts[item],
                    top_logprobs_num=tops[item],
                    return_text_in_logprobs=return_text_in_logprobs,
                    namespace=namespace,
                    image_data=images[item],
                    video_data=videos[item],
                    lora_path=adapters[item],
                    priority=priorities[item],
                    session_params=session,
                )
            )
    return NormalizedInput(specs, is_batch or num_samples > 1)


def _lora_per_item(lora_path: Any, num_items: int) -> list[str | None]:
    """SGLang's `lora_path`: one adapter name for every prompt, or one per prompt (None: base)."""
    if lora_path is None or isinstance(lora_path, str):
        return [lora_path] * num_items
    if not isinstance(lora_path, (list, tuple)) or len(lora_path) != num_items:
        raise InvalidRequestError(
            f"lora_path must be a name or a list of {num_items} names (null for the base model).",
            param="lora_path",
        )
    if not all(name is None or isinstance(name, str) for name in lora_path):
        raise InvalidRequestError("lora_path entries must be adapter names or null.", param="lora_path")
    return list(lora_path)


def _prompts(text: Any, input_ids: Any) -> tuple[list[str | tuple[int, ...]], bool]:
    if text is not None:
        if isinstance(text, str):
            return [text], False
        if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            return list(text), True
        raise InvalidRequestError("text must be a string or a non-empty list of strings.", param="text")
    if not isinstance(input_ids, (list, tuple)) or not input_ids:
        raise InvalidRequestError("input_ids cannot be empty.", param="input_ids")
    ids = _int_tuple(input_ids)
    if ids is not None:
        return [ids], False
    if all(isinstance(seq, (list, tuple)) for seq in input_ids):
        prompts = []
        for seq in input_ids:
            if not seq:
                raise InvalidRequestError("input_ids cannot be empty.", param="input_ids")
            ids = _int_tuple(seq)
            if ids is None:
                raise InvalidRequestError("input_ids must hold integers.", param="input_ids")
            prompts.append(ids)
        return prompts, True
    raise InvalidRequestError(
        "input_ids must be a list of ints or a list of lists of ints.", param="input_ids"
    )


def _images_per_item(data: Any, num_items: int, is_batch: bool, name: str) -> list[tuple[Any, ...]]:
    """SGLang's `image_data` / `video_data`: for one prompt an item or a list of them; for a
    batch a list with one entry (None, an item or a list of items) per prompt. A video given as
    frames is itself a list, so it always comes inside its prompt's list: `[[frame, ...]]`."""
    if data is None:
        return [()] * num_items
    if not is_batch:
        return [_item_list(data)]
    if not isinstance(data, (list, tuple)) or len(data) != num_items:
        count = len(data) if isinstance(data, (list, tuple)) else 1
        raise InvalidRequestError(f"{name} has {count} entries for {num_items} prompts.", param=name)
    return [_item_list(entry) for entry in data]


def _item_list(entry: Any) -> tuple[Any, ...]:
    if entry is None:
        return ()
    if isinstance(entry, (list, tuple)):
        return tuple(entry)
    return (entry,)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_tuple(values: list[Any] | tuple[Any, ...]) -> tuple[int, ...] | None:
    """`values` as a tuple of ints; None when one is not an int (a bool is not)."""
    # NOTE: every request's prompt ids pass here, twice when served (the server checks them before
    # the engine does): the usual list of plain ints is recognised by its set of types, in C,
    # about ten times faster than checking each id in Python.
    if set(map(type, values)) == {int}:
        return tuple(values)
    if all(_is_int(v) for v in values):
        return tuple(int(v) for v in values)
    return None


def _params_per_item(raw: Any, num_items: int) -> list[SamplingParams]:
    if isinstance(raw, list):
        if len(raw) != num_items:
            raise InvalidRequestError(
                f"sampling_params has {len(raw)} entries for {num_items} prompts.", param="sampling_params"
            )
        return [_params(r) for r in raw]
    return [_params(raw)] * num_items


def _params(raw: Any) -> SamplingParams:
    return raw if isinstance(raw, SamplingParams) else SamplingParams.from_dict(raw)


def _single_sample(params: SamplingParams, sample: int) -> SamplingParams:
    """Sample `sample` of `n`. A seeded request's samples get seeds `seed + sample`: the same seed
    would make all n samples identical, and sample 0 stays what `n=1` with that seed gives."""
    if params.n == 1:
        return params
    from dataclasses import replace

    seed = params.seed
    if seed is not None and sample:
        seed = (seed + sample + 2**63) % 2**64 - 2**63  # stays in int64
    return replace(params, n=1, seed=seed)


def _per_item(value: Any, num_items: int, name: str, kind: type, default: Any) -> list[Any]:
    if value is None:
        return [default] * num_items
    if isinstance(value, list):
        if len(value) != num_items:
            raise InvalidRequestError(f"{name} has {len(value)} entries for {num_items} prompts.", param=name)
        values = [default if v is None else v for v in value]
    else:
        values = [value] * num_items
    for v in values:
        if kind is int and not _is_int(v):
            raise InvalidRequestError(f"{name} must be an integer.", param=name)
        if kind is bool and not isinstance(v, bool):
            raise InvalidRequestError(f"{name} must be a boolean.", param=name)
    return values


def _rids(rid: Any, num_items: int, num_sequences: int) -> list[str]:
    if rid is None:
        return [uuid.uuid4().hex for _ in range(num_sequences)]
    if isinstance(rid, str):
        if num_sequences == 1:
            return [rid]
        return [f"{rid}-{i}" for i in range(num_sequences)]
    if isinstance(rid, Sequence) and all(isinstance(r, str) for r in rid):
        rids = list(rid)
        if len(rids) == num_items and num_sequences > num_items:
            rids = [f"{r}-{s}" for s in range(num_sequences // num_items) for r in rids]
        if len(rids) != num_sequences:
            raise InvalidRequestError(
                f"rid has {len(rids)} entries for {num_sequences} sequences.", param="rid"
            )
        duplicates = sorted({r for r in rids if rids.count(r) > 1})
        if duplicates:
            raise InvalidRequestError(
                f"Duplicate request IDs detected within the request: {duplicates}", param="rid"
            )
        return rids
    raise InvalidRequestError("rid must be a string or a list of strings.", param="rid")
