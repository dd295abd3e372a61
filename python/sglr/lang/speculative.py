"""API speculative execution: one call generates past a `gen`, later template parts reuse it.

Completion models: a `gen` with stop strings asks for `num_api_spec_tokens` tokens without
stops; its value is the text up to the first stop, and the rest (`speculated_text`) is matched
against the constant text the program appends next, then used by the next `gen` without a call.

Chat models: inside an assistant turn the interpreter records the constant text and the gens
as a template; at the end of the turn one call generates the whole reply, which
`match_chat_template` splits back into variables.

Both need only `generate` from the backend, so any backend gets them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from sglr.lang.gen_params import GenParams


def earliest_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index of the earliest occurrence of any non-empty stop string in `text`, or None."""
    found = [index for stop in stops if stop and (index := text.find(stop)) >= 0]
    return min(found) if found else None


def can_speculate(params: GenParams) -> bool:
    """A gen can take its value from speculated text only if its end is marked by a stop string
    and its text is not constrained (a regex or schema constrains one call's whole output)."""
    return (
        bool(params.stop)
        and params.regex is None
        and params.json_schema is None
        and params.ebnf is None
        and params.structural_tag is None
        and params.tools is None
        and params.dtype is None
    )


def consume(speculated: str, value: str) -> str:
    """What remains of `speculated` after the program appends `value` ("" on a mismatch)."""
    if speculated.startswith(value):
        return speculated[len(value) :]
    return ""


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class GenPart:
    name: str | None
    params: GenParams
    node_id: int | None = None


def chat_call_params(parts: Sequence[TextPart | GenPart], num_spec_tokens: int, stop_str: tuple) -> GenParams:
    """Sampling params of the one call that generates a whole assistant turn.

    The gens must agree on everything but their length and stop strings; the call gets
    `num_spec_tokens` tokens and only the template's end-of-turn stops.
    """
    gens = [part.params for part in parts if isinstance(part, GenPart)]
    first = gens[0]

    def key(params: GenParams) -> GenParams:
        return dataclasses.replace(params, max_new_tokens=first.max_new_tokens, stop=())

    for params in gens[1:]:
        if key(params) != key(first):
            raise ValueError(
                "sampling parameters should be consistent if turn on api speculative execution "
                "(all gens of one assistant turn share one call)"
            )
    return dataclasses.replace(first, max_new_tokens=num_spec_tokens, stop=tuple(stop_str))


def match_chat_template(parts: Sequence[TextPart | GenPart], reply: str) -> list[str] | None:
    """Splits `reply` along the template `parts`; returns the text of each part, or None.

    Literal parts must appear in order (surrounding whitespace is tolerated, the literal itself
    is kept). A gen part ends at its first stop string or where the next literal starts, or at
    the end of the reply when it is the last part.
    """
    values: list[str] = []
    pos = 0
    for index, part in enumerate(parts):
        if isinstance(part, TextPart):
            literal = part.text.strip()
            rest = reply[pos:]
            if not literal:
                values.append(part.text)
                continue
            stripped = rest.lstrip()
            if not stripped.startswith(literal):
                return None
            pos += len(rest) - len(stripped) + len(literal)
            if part.text.rstrip() != part.text:
                pos += len(reply[pos:]) - len(reply[pos:].lstrip())
            values.append(part.text)
            continue
        rest = reply[pos:]
        next_literal = next(
            (p.text.strip() for p in parts[index + 1 :] if isinstance(p, TextPart) and p.text.strip()), None
        )
        ends = []
        stop_at = earliest_stop(rest, part.params.stop)
        if stop_at is not None:
            ends.append(stop_at)
        if next_literal is not None and (literal_at := rest.find(next_literal)) >= 0:
            ends.append(literal_at)
        if not ends:
            if any(isinstance(p, GenPart) for p in parts[index + 1 :]) or next_literal is not None:
                return None
            ends.append(len(rest))
        end = min(ends)
        values.append(rest[:end].strip())
        pos += end
    return values
