"""Which call format a model writes, read from its chat template.

`<tool_call>` -> Hermes (Qwen2.5, Hermes); `[TOOL_CALLS]` -> Mistral; `<|python_tag|>` or a
template that renders `tools` otherwise with "parameters" -> Llama 3.x JSON. A template that never
mentions `tools` cannot show them: the tools go in a system message we write
(`fallback_prompt.py`) asking for the Hermes format, which is parsed the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sglr.server.tools.calls import ParsedReply
from sglr.server.tools.hermes import parse_hermes
from sglr.server.tools.llama3 import parse_llama3
from sglr.server.tools.mistral import parse_mistral


@dataclass(frozen=True)
class ToolFormat:
    name: str
    parse: Callable[[str], ParsedReply]
    # The forced-call regex is `prefix call (separator call)* suffix`, each call
    # `{"name": "<name>", "<arguments_key>": <arguments>}` (see constraint.py).
    prefix: str
    separator: str
    suffix: str
    arguments_key: str
    template_renders_tools: bool
    # Text that starts a call wherever it appears ("" when only a whole reply can be calls).
    marker: str
    # Markers a tokenizer may hold as special tokens (the reply must then keep special tokens).
    special_markers: tuple[str, ...] = ()


HERMES = ToolFormat(
    "hermes",
    parse_hermes,
    "<tool_call>\n",
    "\n</tool_call>\n<tool_call>\n",
    "\n</tool_call>",
    "arguments",
    True,
    "<tool_call>",
    ("<tool_call>", "</tool_call>"),
)
MISTRAL = ToolFormat(
    "mistral",
    parse_mistral,
    "[TOOL_CALLS] [",
    ", ",
    "]",
    "arguments",
    True,
    "[TOOL_CALLS]",
    ("[TOOL_CALLS]",),
)
LLAMA3 = ToolFormat("llama3_json", parse_llama3, "", "; ", "", "parameters", True, "", ("<|python_tag|>",))
FALLBACK = ToolFormat(
    "fallback_hermes",
    parse_hermes,
    HERMES.prefix,
    HERMES.separator,
    HERMES.suffix,
    "arguments",
    False,
    HERMES.marker,
)


def detect_tool_format(template: str | None) -> ToolFormat:
    text = template or ""
    if "<tool_call>" in text:
        return HERMES
    if "[TOOL_CALLS]" in text:
        return MISTRAL
    if "<|python_tag|>" in text or ("tools" in text and '"parameters"' in text):
        return LLAMA3
    return FALLBACK
