"""The constraint that forces valid calls when `tool_choice` is "required" or a named function,
or (on "auto") when every tool is `strict`: the format's wrapper (`prefix call (separator call)*
suffix`, one call unless `parallel_tool_calls`) around each tool's arguments schema.

Schemas go the engine's way: a regex when every schema is non-recursive (the core's JSON schema
compiler; an FSM with memoised masks), else EBNF with each schema's grammar embedded (the core's
grammar engine; `$ref` cycles to any depth). On "auto" with strict tools the model may also
answer in text: `free_text (calls)?`, where free text never contains the call marker (see
`free_text.py`), so a call it starts is always a valid one (free text through the grammar
engine costs a trie walk over nearly the whole vocabulary per step, so the regex path carries
it whenever it can). Auto with some non-strict tools stays unconstrained (parsed after).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass

from sglr._core import json_schema_is_recursive, json_schema_to_ebnf, json_schema_to_regex
from sglr.errors import ConstraintTooLargeError, UnsupportedSchemaError
from sglr.http.errors import ApiError
from sglr.server.tools.formats import ToolFormat
from sglr.server.tools.free_text import free_text_regex, free_text_rules
from sglr.server.tools.request import ToolRequest, ToolSpec

_SPECIAL = set(".^$*+?()[]{}|\\")


@dataclass(frozen=True)
class CallConstraint:
    """A sampling-params field ("regex" or "ebnf") and its value."""

    field: str
    text: str


def literal(text: str) -> str:
    """`text` escaped for the core's regex dialect (newlines written as `\\n`)."""
    return "".join("\\n" if c == "\n" else ("\\" + c if c in _SPECIAL else c) for c in text)


def ebnf_literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def check_schemas(request: ToolRequest) -> None:
    """Every tool's parameters compile (a 400 naming the tool otherwise), also when no call is
    forced, so a bad schema fails the request that sends it rather than a later one."""
    for tool in request.tools:
        with _schema_errors(tool, request):
            _arguments(json.dumps(tool.parameters))


# Longest regex of one tool's arguments (the engine's default for a plain `json_schema` is 4 KiB,
# past which the grammar path's lazy lexemes compile faster).
TOOL_MAX_REGEX_LEN = 4 << 20


@functools.lru_cache(maxsize=256)
def _arguments(schema: str) -> tuple[str, str]:
    """("regex", pattern) for a schema the regex path compiles, else ("ebnf", rules named
    `arguments`): recursive schemas, and those the regex path refuses by keyword or size (as the
    engine routes a plain `json_schema`); the grammar path's own refusal is what the client sees."""
    if not json_schema_is_recursive(schema):
        try:
            # However long: "auto" joins the calls with free text, which costs grammar masks a
            # walk of nearly the whole vocabulary a step, far more than one slower compile.
            return "regex", json_schema_to_regex(
                schema, max_regex_len=TOOL_MAX_REGEX_LEN, max_unrolled_length=None
            )
        except (UnsupportedSchemaError, ConstraintTooLargeError):
            pass
    return "ebnf", json_schema_to_ebnf(schema, "arguments")


def forced_call_constraint(request: ToolRequest, fmt: ToolFormat) -> CallConstraint | None:
    forced = request.forced_tools()
    if not forced:
        return None
    optional = request.choice == "auto"
    if optional and len(forced) != len(request.tools):
        return None
    if any(_needs_grammar(tool, request) for tool in forced):
        return CallConstraint("ebnf", _calls_grammar(forced, fmt, request, optional))
    call = "(?:" + "|".join(_call_regex(tool, fmt, request) for tool in forced) + ")"
    calls = f"{call}(?:{literal(fmt.separator)}{call})*" if request.parallel else call
    calls = literal(fmt.prefix) + calls + literal(fmt.suffix)
    if optional:  # text, or calls (after text when a marker can start them anywhere)
        free = free_text_regex(fmt.marker)
        return CallConstraint("regex", f"(?:{free})(?:{calls})?" if fmt.marker else f"(?:{free})|(?:{calls})")
    return CallConstraint("regex", calls)


def _needs_grammar(tool: ToolSpec, request: ToolRequest) -> bool:
    with _schema_errors(tool, request):
        return _arguments(json.dumps(tool.parameters))[0] == "ebnf"


def _head(tool: ToolSpec, fmt: ToolFormat) -> str:
    return json.dumps({"name": tool.name})[:-1] + f", {json.dumps(fmt.arguments_key)}: "


def _call_regex(tool: ToolSpec, fmt: ToolFormat, request: ToolRequest) -> str:
    with _schema_errors(tool, request):
        _, arguments = _arguments(json.dumps(tool.parameters))
    return literal(_head(tool, fmt)) + f"(?:{arguments})" + literal("}")


def _calls_grammar(
    forced: tuple[ToolSpec, ...], fmt: ToolFormat, request: ToolRequest, optional: bool
) -> str:
    calls = "call (" + ebnf_literal(fmt.separator) + " call)*" if request.parallel else "call"
    block = " ".join(p for p in (_maybe_literal(fmt.prefix), calls, _maybe_literal(fmt.suffix)) if p)
    lines = []
    if optional:  # text, or calls (after text when a marker can start them anywhere)
        then_calls = "free_text calls" if fmt.marker else "calls"
        lines.append(f"root ::= free_text | {then_calls}\ncalls ::= {block}")
        lines.append(free_text_rules("free_text", fmt.marker))
    else:
        lines.append(f"root ::= {block}")
    lines.append("call ::= " + " | ".join(f"call_{i}" for i in range(len(forced))))
    for i, tool in enumerate(forced):
        lines.append(f'call_{i} ::= {ebnf_literal(_head(tool, fmt))} arguments_{i} "}}"')
        with _schema_errors(tool, request):
            lines.append(json_schema_to_ebnf(json.dumps(tool.parameters), f"arguments_{i}"))
    return "\n".join(lines)


def _maybe_literal(text: str) -> str:
    return ebnf_literal(text) if text else ""


@contextlib.contextmanager
def _schema_errors(tool: ToolSpec, request: ToolRequest) -> Iterator[None]:
    """Compile errors of a tool's schema -> a 400 naming the tool's parameters."""
    try:
        yield
    except ApiError:
        raise
    except Exception as exc:  # the core's typed errors (sglr.errors) and ValueError for bad JSON
        raise ApiError.bad_request(
            f"tool {tool.name!r}: cannot compile its parameters schema: {exc}",
            f"tools[{request.tools.index(tool)}].function.parameters",
        ) from exc
