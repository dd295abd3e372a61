"""`select` over an OpenAI-compatible API, three ways.

- Completion models, `logprobs` (default): one request with `echo` and `logprobs` scores every
  `prompt + choice`; the tokens whose text overlaps the choice (found by `text_offset`) are the
  choice's logprobs, so every choices method works (the unconditional one makes a second
  request with the choices alone).
- Chat models, `logprobs` (default): a chat API cannot score given text, so one request asks for
  one token with `top_logprobs`; each choice scores the logprob of the longest top token it
  starts with. With a `tokenizer`, the choices' first tokens get the same +100 logit bias, which
  keeps their relative order and puts all of them in the top list. Choices are told apart by
  their first token only.
- `logit_bias` (needs a `tokenizer`): greedy, one 1-token request per step, biased to the next
  tokens of the choices still possible; completion models only past the first token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sglr.errors import BackendError
from sglr.lang.choices import ChoicesDecision, ChoicesSamplingMethod, decide

TOP_LOGPROBS = 20
BIAS = 100


def select_choice(
    backend: Any, s: Any, choices: list[str], choices_method: ChoicesSamplingMethod
) -> ChoicesDecision:
    method = backend.select_method
    if method == "logit_bias":
        return select_by_logit_bias(backend, s, choices)
    if backend.is_chat_model:
        return select_by_first_token(backend, s, choices, choices_method)
    return select_by_echo(backend, s, choices, choices_method)


def _echo_logprobs(backend: Any, prefix: str, choices: Sequence[str]) -> list[list[list[Any]]]:
    """Per choice: `[logprob, None, token]` for the tokens of `prefix + choice` overlapping the choice."""
    response = backend.call(
        "completion",
        prompt=[prefix + choice for choice in choices],
        echo=True,
        logprobs=1,
        max_tokens=1,
        temperature=0,
    )
    by_index = sorted(response.choices, key=lambda choice: choice.index)
    if len(by_index) != len(choices):
        raise BackendError(f"select expected {len(choices)} completions, got {len(by_index)}")
    start = len(prefix)
    scored = []
    for choice_text, completion in zip(choices, by_index, strict=True):
        logprobs = completion.logprobs
        if logprobs is None or logprobs.text_offset is None:
            raise BackendError("the server returned no echo logprobs; try select_method='logit_bias'")
        end = start + len(choice_text)
        entries = []
        for token, value, offset in zip(
            logprobs.tokens, logprobs.token_logprobs, logprobs.text_offset, strict=False
        ):
            if offset >= end:
                break  # the generated token
            if offset + len(token) > start:
                entries.append([value, None, token])
        scored.append(entries)
    return scored


def select_by_echo(
    backend: Any, s: Any, choices: list[str], choices_method: ChoicesSamplingMethod
) -> ChoicesDecision:
    conditional = _echo_logprobs(backend, s.text_, choices)
    unconditional = None
    if choices_method.requires_unconditional_logprobs:
        unconditional = _echo_logprobs(backend, "", choices)
    return decide(choices, conditional, choices_method, None, unconditional)


def _first_token_ids(tokenizer: Any, choices: Sequence[str]) -> list[list[int]]:
    def encode(text: str) -> list[int]:
        try:
            return list(tokenizer.encode(text, add_special_tokens=False))
        except TypeError:
            return list(tokenizer.encode(text))

    return [encode(choice) for choice in choices]


def select_by_first_token(
    backend: Any, s: Any, choices: list[str], choices_method: ChoicesSamplingMethod
) -> ChoicesDecision:
    if choices_method.requires_unconditional_logprobs:
        raise NotImplementedError(
            f"{choices_method.name} needs logprobs of given text, which chat APIs do not return; "
            "use a completion model or token_length_normalized"
        )
    kwargs: dict[str, Any] = {
        "messages": backend.chat_messages(s),
        "max_tokens": 1,
        "logprobs": True,
        "top_logprobs": TOP_LOGPROBS,
        "temperature": 0,
    }
    if backend.tokenizer is not None:
        first_ids = {ids[0] for ids in _first_token_ids(backend.tokenizer, choices) if ids}
        kwargs["logit_bias"] = {str(token_id): BIAS for token_id in sorted(first_ids)}
    response = backend.call("chat", **kwargs)
    content = response.choices[0].logprobs.content if response.choices[0].logprobs else None
    if not content:
        raise BackendError("the chat endpoint returned no logprobs for select")
    top = [(entry.token, entry.logprob) for entry in content[0].top_logprobs]
    top.append((content[0].token, content[0].logprob))
    scored = []
    for choice in choices:
        matches = [
            (len(token.lstrip()), logprob, token)
            for token, logprob in top
            if token.strip() and (choice.startswith(token) or choice.startswith(token.lstrip()))
        ]
        if matches:
            _, logprob, token = max(matches)
            scored.append([[logprob, None, token]])
        else:
            scored.append([])
    if all(not entries for entries in scored):
        raise BackendError(
            f"none of the choices {choices!r} starts with one of the model's top {TOP_LOGPROBS} tokens"
        )
    return decide(choices, scored, choices_method)


def select_by_logit_bias(backend: Any, s: Any, choices: list[str]) -> ChoicesDecision:
    tokenizer = backend.tokenizer
    if tokenizer is None:
        raise ValueError("select_method='logit_bias' needs OpenAI(..., tokenizer=...) to know token ids")
    token_ids = _first_token_ids(tokenizer, choices)
    chosen: list[int] = []
    alive = list(range(len(choices)))
    num_calls = 0
    while True:
        alive = [i for i in alive if token_ids[i][: len(chosen)] == chosen]
        next_ids = sorted({token_ids[i][len(chosen)] for i in alive if len(token_ids[i]) > len(chosen)})
        if len(alive) <= 1 or not next_ids:
            break
        if len(next_ids) == 1:  # forced: no call needed
            chosen.append(next_ids[0])
            continue
        bias = {str(token_id): BIAS for token_id in next_ids}
        if backend.is_chat_model:
            if chosen:
                raise BackendError(
                    f"choices {[choices[i] for i in alive]!r} share their first token; a chat model "
                    "cannot continue a partial reply, so logit-bias select cannot tell them apart"
                )
            response = backend.call(
                "chat", messages=backend.chat_messages(s), max_tokens=1, logit_bias=bias, temperature=0
            )
            text = response.choices[0].message.content or ""
        else:
            prompt = s.text_ + tokenizer.decode(chosen)
            response = backend.call("completion", prompt=prompt, max_tokens=1, logit_bias=bias, temperature=0)
            text = response.choices[0].text
        num_calls += 1
        decoded = {token_id: tokenizer.decode([token_id]) for token_id in next_ids}
        match = [t for t in next_ids if decoded[t] == text] or [
            t for t in next_ids if text and decoded[t].startswith(text)
        ]
        if not match:
            raise BackendError(f"the model answered {text!r}, which continues none of the choices")
        chosen.append(match[0])
    decision = choices[alive[0]] if alive else choices[0]
    return ChoicesDecision(decision, {"token_ids": chosen, "num_calls": num_calls})
