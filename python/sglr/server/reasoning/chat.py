"""Reasoning in one chat request: the server's `--reasoning-parser` format, unless the request
says `separate_reasoning: false` (the reasoning stays in `content`) or turns the model's thinking
off through the format's `chat_template_kwargs` switch; `stream_reasoning: false` holds a
stream's reasoning until the reasoning ends and sends it in one delta. An answer's constraint
(response_format, tools) applies from the end of the reasoning on."""

from __future__ import annotations

from typing import Any

from sglr.http.request import get_bool
from sglr.server.reasoning.formats import ReasoningFormat
from sglr.server.reasoning.split import ReasoningSplitter, split_reasoning


class ChatReasoning:
    def __init__(
        self, fmt: ReasoningFormat | None, body: dict[str, Any], template_kwargs: dict[str, Any]
    ) -> None:
        separate = bool(get_bool(body, "separate_reasoning", True))
        self.stream_reasoning = bool(get_bool(body, "stream_reasoning", True))
        switch = None if fmt is None else fmt.thinking_switch
        if switch is not None and template_kwargs.get(switch) is False:
            fmt = None  # the template was told not to think: nothing to split off
        self.thinking = fmt  # the model reasons first (whether or not it is split off)
        self.format = fmt if separate else None

    def gate_constraint(self, params: dict[str, Any]) -> None:
        """A reply that reasons first takes its answer's constraint (the chat server's
        response_format or tool call) only after the reasoning
        (`SamplingParams.reasoning_close_tag`)."""
        fmt = self.thinking
        if fmt is None or not any(params.get(k) for k in ("json_schema", "regex", "ebnf", "structural_tag")):
            return
        params["reasoning_close_tag"] = fmt.close_tag
        if not fmt.starts_in_reasoning:
            params["reasoning_open_tag"] = fmt.open_tag

    @property
    def active(self) -> bool:
        return self.format is not None

    def split(self, text: str) -> tuple[str | None, str]:
        """A whole reply's `reasoning_content` (None when there is none) and content."""
        if self.format is None:
            return None, text
        reasoning, content = split_reasoning(self.format, text)
        return reasoning or None, content


class ReasoningDeltas:
    """One streamed choice's text split into reasoning deltas and the content that follows."""

    def __init__(self, reasoning: ChatReasoning) -> None:
        self.splitter = None if reasoning.format is None else ReasoningSplitter(reasoning.format)
        self.stream_reasoning = reasoning.stream_reasoning
        self.held = ""  # reasoning kept back (stream_reasoning false) until the reasoning ends

    def feed(self, text: str) -> tuple[str, str]:
        """The reasoning to send now and the content `text` completes."""
        if self.splitter is None:
            return "", text
        reasoning, content = self.splitter.feed(text)
        return self._release(reasoning, ended=bool(content) or self.splitter.in_content), content

    def finish(self) -> tuple[str, str]:
        """What is held back at the end of the reply."""
        if self.splitter is None:
            return "", ""
        reasoning, content = self.splitter.finish()
        return self._release(reasoning, ended=True), content

    def _release(self, reasoning: str, ended: bool) -> str:
        if self.stream_reasoning:
            return reasoning
        self.held += reasoning
        if not ended:
            return ""
        out, self.held = self.held, ""
        return out
