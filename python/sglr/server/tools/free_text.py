"""Free text for `tool_choice: "auto"` with strict tools: text that cannot start a call, as one
GBNF rule over a single regex lexeme (a DFA in the core, so masks over free text cost what a
regex's do), so under the constraint any call the model starts is a full valid one.

With a call marker (`<tool_call>`, `[TOOL_CALLS]`) free text is any text that never contains
the marker: the marker's KMP automaton (state i = the longest marker prefix the text ends
with; the whole marker has no state) turned into a regex by solving its equations
(X_i = "" | sum over c of c X_next(i, c)) with Arden's rule, last state first. Without a marker
(Llama 3 JSON: a reply is all calls or all text) free text is text whose first non-space
character is not `{`.
"""

from __future__ import annotations

_SPACE = " \\t\\n\\r"


def free_text_regex(marker: str) -> str:
    """A regex (no `/` in it, so it also fits a GBNF `/.../` terminal) of text that cannot
    start a call."""
    if not marker:
        return f"[{_SPACE}]*(?:[^{{{_SPACE}](?s:.)*)?"
    return _without(marker)


def free_text_rules(name: str, marker: str) -> str:
    """The rule `name ::= /.../` for text that cannot start a call."""
    return f"{name} ::= /{free_text_regex(marker)}/"


def _without(marker: str) -> str:
    """A regex of the strings that do not contain `marker`."""
    k = len(marker)
    alphabet = sorted(set(marker))
    # equations[i] = (constant, {j: coefficient}) for X_i = constant | coefficient_j X_j ...
    equations: list[tuple[str | None, dict[int, str]]] = []
    for i in range(k):
        by_target: dict[int, list[str]] = {0: []}
        for c in alphabet:
            target = _next_state(marker, i, c)
            if target < k:
                by_target.setdefault(target, []).append(c)
        coefficients = {}
        for target, chars in by_target.items():
            classes = [f"[^{''.join(map(_class_char, alphabet))}]"] if target == 0 else []
            if chars:
                classes.append(
                    _class_char(chars[0]) if len(chars) == 1 else f"[{''.join(map(_class_char, chars))}]"
                )
            coefficients[target] = _alternation(classes)
        equations.append(("", coefficients))
    for i in range(k - 1, -1, -1):
        constant, coefficients = equations[i]
        loop = coefficients.pop(i, None)
        if loop is not None:
            star = f"(?:{loop})*"
            constant = star + (constant or "")
            coefficients = {j: star + _group(c) for j, c in coefficients.items()}
        equations[i] = (constant, coefficients)
        for h in range(i):  # substitute X_i into the earlier equations
            h_constant, h_coefficients = equations[h]
            via = h_coefficients.pop(i, None)
            if via is None:
                continue
            h_constant = _alternation([h_constant or "", _group(via) + _group(constant)])
            for j, c in coefficients.items():
                term = _group(via) + _group(c)
                h_coefficients[j] = _alternation([h_coefficients[j], term]) if j in h_coefficients else term
            equations[h] = (h_constant, h_coefficients)
    constant, coefficients = equations[0]
    assert not coefficients, "state 0 is solved last: no references remain"
    return constant or ""


def _alternation(parts: list[str]) -> str:
    unique = list(dict.fromkeys(parts))
    return unique[0] if len(unique) == 1 else "(?:" + "|".join(unique) + ")"


def _group(regex: str) -> str:
    return f"(?:{regex})" if regex else ""


def _next_state(marker: str, matched: int, c: str) -> int:
    """The longest marker prefix that `marker[:matched] + c` ends with."""
    text = marker[:matched] + c
    for length in range(min(len(text), len(marker)), 0, -1):
        if text.endswith(marker[:length]):
            return length
    return 0


def _class_char(c: str) -> str:
    """A character escaped for a regex, inside or outside a class (hex, so never a `/`)."""
    return c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):X}}}"
