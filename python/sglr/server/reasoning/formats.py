"""The reasoning formats `--reasoning-parser` names (SGLang's names). Each says where a reply's
reasoning is: between an open and a close tag, and whether the reply starts inside it (the chat
template already wrote the open tag) or only when the reply opens it itself."""

from __future__ import annotations

from dataclasses import dataclass

from sglr.errors import EngineConfigError


@dataclass(frozen=True)
class ReasoningFormat:
    """name: the `--reasoning-parser` value.
    starts_in_reasoning: the reply begins inside the reasoning (an open tag it writes anyway is
        dropped); otherwise there is reasoning only when the reply starts with the open tag.
    thinking_switch: the `chat_template_kwargs` key whose false value tells the template not to
        think (then the whole reply is content), or None when the model always thinks.
    """

    name: str
    starts_in_reasoning: bool
    thinking_switch: str | None
    open_tag: str = "<think>"
    close_tag: str = "</think>"


REASONING_FORMATS: dict[str, ReasoningFormat] = {
    fmt.name: fmt
    for fmt in (
        # DeepSeek-R1's template ends the prompt inside `<think>`: the reply is reasoning up to
        # `</think>` (older checkpoints repeat the `<think>`).
        ReasoningFormat("deepseek-r1", starts_in_reasoning=True, thinking_switch=None),
        # Qwen3 opens `<think>` itself; with enable_thinking false its template writes an empty
        # block into the prompt and the reply is content only.
        ReasoningFormat("qwen3", starts_in_reasoning=False, thinking_switch="enable_thinking"),
    )
}


def reasoning_format(name: str | None) -> ReasoningFormat | None:
    """The format `name` names (None: no reasoning parser); an unknown name is a config error."""
    if name is None:
        return None
    try:
        return REASONING_FORMATS[name]
    except KeyError:
        choices = ", ".join(REASONING_FORMATS)
        raise EngineConfigError(f"unknown reasoning parser {name!r} (choices: {choices})") from None
