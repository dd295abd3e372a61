"""How `select` picks a choice from per-token log-probabilities.

A backend scores each choice continuation (the log-probabilities of the choice's tokens given
the prompt) and calls a `ChoicesSamplingMethod` to decide. The three methods are module-level
instances, passed as `select(..., choices_method=sgl.greedy_token_selection)`.

Logprob entries use the native wire shape `[logprob | None, token_id, token_text | None]`;
`None` logprobs (the first input position) are skipped everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

LogprobEntry = Sequence[Any]  # [logprob | None, token_id, token_text | None]


@dataclass
class ChoicesDecision:
    decision: str
    meta_info: dict[str, Any] = field(default_factory=dict)


def token_logprob_values(entries: Sequence[LogprobEntry]) -> list[float]:
    """The non-null logprobs of `entries`, in order."""
    return [float(entry[0]) for entry in entries if entry[0] is not None]


def mean_logprob(entries: Sequence[LogprobEntry]) -> float:
    """Mean of the non-null logprobs; an empty choice scores -inf so it never wins by default."""
    values = token_logprob_values(entries)
    return sum(values) / len(values) if values else -math.inf


def _argmax(values: Sequence[float]) -> int:
    best = 0
    for index, value in enumerate(values):
        if value > values[best]:
            best = index
    return best


def _decision(
    choice: str,
    normalized_prompt_logprobs: Sequence[float],
    input_token_logprobs: Sequence[Sequence[LogprobEntry]],
    rest: dict[str, Any],
    **method_meta: Any,
) -> ChoicesDecision:
    """The decision for `choice`, with the meta info every method reports and its own."""
    meta = {
        "normalized_prompt_logprobs": list(normalized_prompt_logprobs),
        "input_token_logprobs": input_token_logprobs,
        "output_token_logprobs": rest.get("output_token_logprobs"),
        **method_meta,
    }
    return ChoicesDecision(choice, meta)


class ChoicesSamplingMethod:
    """Decides a `select` from the scored choices. Stateless; compare by `name`."""

    name = "base"
    requires_unconditional_logprobs = False

    def __call__(
        self,
        *,
        choices: Sequence[str],
        normalized_prompt_logprobs: Sequence[float],
        input_token_logprobs: Sequence[Sequence[LogprobEntry]],
        output_token_logprobs: Sequence[Sequence[LogprobEntry]] | None = None,
        unconditional_token_logprobs: Sequence[Sequence[LogprobEntry]] | None = None,
    ) -> ChoicesDecision:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class TokenLengthNormalized(ChoicesSamplingMethod):
    """The choice with the highest mean token logprob (ties: the first such choice)."""

    name = "token_length_normalized"

    def __call__(self, *, choices, normalized_prompt_logprobs, input_token_logprobs, **rest):
        best = _argmax(normalized_prompt_logprobs)
        return _decision(choices[best], normalized_prompt_logprobs, input_token_logprobs, rest)


class GreedyTokenSelection(ChoicesSamplingMethod):
    """Compare choices token by token: keep the choices with the best logprob at each position.

    Shorter choices are padded with their own mean logprob. The scan stops when one choice
    remains; among several survivors the first wins.
    """

    name = "greedy_token_selection"

    def __call__(self, *, choices, normalized_prompt_logprobs, input_token_logprobs, **rest):
        rows = [token_logprob_values(entries) for entries in input_token_logprobs]
        width = max((len(row) for row in rows), default=0)
        matrix = []
        for row in rows:
            pad = sum(row) / len(row) if row else -math.inf
            matrix.append(row + [pad] * (width - len(row)))
        remaining = list(range(len(choices)))
        for column in range(width):
            if len(remaining) == 1:
                break
            best = max(matrix[row][column] for row in remaining)
            remaining = [row for row in remaining if matrix[row][column] == best]
        return _decision(
            choices[remaining[0]],
            normalized_prompt_logprobs,
            input_token_logprobs,
            rest,
            greedy_logprob_matrix=matrix,
        )


class UnconditionalLikelihoodNormalized(ChoicesSamplingMethod):
    """The choice whose tokens gain the most from the prompt: mean(logP(c|prompt) - logP(c)).

    The unconditional logprob of a choice's first token is unknown (it has no context) and
    counts as 0, so the first token contributes its conditional logprob alone.
    """

    name = "unconditional_likelihood_normalized"
    requires_unconditional_logprobs = True

    def __call__(
        self,
        *,
        choices,
        normalized_prompt_logprobs,
        input_token_logprobs,
        unconditional_token_logprobs=None,
        **rest,
    ):
        if unconditional_token_logprobs is None:
            raise ValueError("Unconditional token logprobs are required for this method.")
        scores = []
        for conditional, unconditional in zip(
            input_token_logprobs, unconditional_token_logprobs, strict=False
        ):
            cond = token_logprob_values(conditional)
            uncond = [0.0 if entry[0] is None else float(entry[0]) for entry in unconditional]
            uncond = uncond[-len(cond) :] if cond else []
            diffs = [c - u for c, u in zip(cond, uncond, strict=False)]
            scores.append(sum(diffs) / len(diffs) if diffs else -math.inf)
        best = _argmax(scores)
        return _decision(
            choices[best],
            normalized_prompt_logprobs,
            input_token_logprobs,
            rest,
            unconditional_token_logprobs=unconditional_token_logprobs,
            normalized_unconditional_prompt_logprobs=scores,
        )


token_length_normalized = TokenLengthNormalized()
greedy_token_selection = GreedyTokenSelection()
unconditional_likelihood_normalized = UnconditionalLikelihoodNormalized()

CHOICES_METHODS = {
    method.name: method
    for method in (token_length_normalized, greedy_token_selection, unconditional_likelihood_normalized)
}


def choices_method_by_name(name: str) -> ChoicesSamplingMethod:
    try:
        return CHOICES_METHODS[name]
    except KeyError:
        raise ValueError(f"unknown choices method {name!r}; known: {sorted(CHOICES_METHODS)}") from None


def decide(
    choices: Sequence[str],
    input_token_logprobs: Sequence[Sequence[LogprobEntry]],
    choices_method: ChoicesSamplingMethod,
    output_token_logprobs: Sequence[Sequence[LogprobEntry]] | None = None,
    unconditional_token_logprobs: Sequence[Sequence[LogprobEntry]] | None = None,
) -> ChoicesDecision:
    """Runs `choices_method` on per-choice token logprobs (the shared tail of every backend)."""
    if len(input_token_logprobs) != len(choices):
        raise ValueError(f"got logprobs for {len(input_token_logprobs)} of {len(choices)} choices")
    return choices_method(
        choices=list(choices),
        normalized_prompt_logprobs=[mean_logprob(entries) for entries in input_token_logprobs],
        input_token_logprobs=input_token_logprobs,
        output_token_logprobs=output_token_logprobs,
        unconditional_token_logprobs=unconditional_token_logprobs,
    )
