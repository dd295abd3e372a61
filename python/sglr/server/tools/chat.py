"""Tool calling in one chat request: what the template gets, the call constraint, and the
reply turned into an assistant message with `tool_calls`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sglr.http.errors import ApiError
from sglr.limits import MAX_TOOL_SCHEMA_BYTES, MAX_TOOLS
from sglr.server.tools.constraint import CallConstraint, check_schemas, forced_call_constraint
from sglr.server.tools.fallback_prompt import history_as_text, with_fallback_prompt
from sglr.server.tools.formats import ToolFormat, detect_tool_format
from sglr.server.tools.request import ToolRequest, read_tool_request


class ChatTools:
    def __init__(
        self,
        body: dict[str, Any],
        chat_template: str | None,
        max_tools: int = MAX_TOOLS,
        max_schema_bytes: int = MAX_TOOL_SCHEMA_BYTES,
    ) -> None:
        self.request: ToolRequest = read_tool_request(body, max_tools, max_schema_bytes)
        self.format: ToolFormat = detect_tool_format(chat_template)
        if self.request.active:
            check_schemas(self.request)
        self.constraint: CallConstraint | None = (
            forced_call_constraint(self.request, self.format) if self.request.active else None
        )

    @property
    def active(self) -> bool:
        return self.request.active

    def render_inputs(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The messages and extra template kwargs that show the tools to the model (a template
        that cannot render tools gets tool turns in the history as text even without tools)."""
        if not self.format.template_renders_tools:
            history = history_as_text(messages)
            return (with_fallback_prompt(history, self.request.tools) if self.active else history), {}
        if not self.active:
            return messages, {}
        return messages, {"tools": [t.as_template_tool() for t in self.request.tools]}

    def constrain(self, params: dict[str, Any]) -> None:
        """Adds the call constraint to the sampling params (one grammar per request)."""
        if self.constraint is None:
            return
        for field in ("regex", "json_schema", "ebnf", "structural_tag"):
            if params.get(field) is not None:
                raise ApiError.bad_request(
                    "response_format / regex / ebnf cannot be combined with a constrained tool call",
                    "tool_choice",
                )
        params[self.constraint.field] = self.constraint.text

    def keep_special_tokens(self, params: dict[str, Any], is_special: Callable[[str], bool]) -> None:
        """Keeps special tokens in the reply when the format's markers are special tokens of the
        tokenizer (Mistral's `[TOOL_CALLS]`, Llama 3's `<|python_tag|>`), so the parser sees
        them; a `skip_special_tokens` the client set wins."""
        if not self.active or "skip_special_tokens" in params:
            return
        if any(is_special(marker) for marker in self.format.special_markers):
            params["skip_special_tokens"] = False

    def message(self, text: str) -> tuple[dict[str, Any], bool]:
        """The assistant message for a whole reply and whether it holds tool calls."""
        if not self.active:
            return {"role": "assistant", "content": text, "tool_calls": None, "refusal": None}, False
        parsed = self.format.parse(text)
        calls = parsed.calls if self.request.parallel else parsed.calls[:1]
        if not calls:
            return {"role": "assistant", "content": text, "tool_calls": None, "refusal": None}, False
        tool_calls = [call.to_openai() for call in calls]
        return {
            "role": "assistant",
            "content": parsed.content,
            "tool_calls": tool_calls,
            "refusal": None,
        }, True
