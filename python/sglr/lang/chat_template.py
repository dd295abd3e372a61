"""Chat templates of the frontend: the text a role adds before and after its content.

The template only shapes the prompt text (`s.text()`) and the message list (`s.messages()`);
a server formats `/v1/chat/completions` with its own tokenizer template. A backend picks one with
`choose_chat_template(model_path=..., tokenizer_template=...)`: a tokenizer's Jinja template is
the stronger signal, then the model name, then `default`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum


class ChatTemplateStyle(Enum):
    PLAIN = "plain"
    # Llama-2: the system block sits inside the first [INST], and that user turn opens no new one.
    LLAMA2 = "llama2"


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    role_prefix_and_suffix: dict[str, tuple[str, str]]
    default_system_prompt: str | None = None
    stop_str: tuple[str, ...] = ()
    image_token: str = "<image>"
    video_token: str = "<video>"
    style: ChatTemplateStyle = ChatTemplateStyle.PLAIN
    extra: dict[str, str] = field(default_factory=dict)

    def get_prefix_and_suffix(self, role: str, history: Sequence[dict]) -> tuple[str, str]:
        """Prefix and suffix of a `role` turn that follows the messages in `history`."""
        prefix, suffix = self.role_prefix_and_suffix.get(role, ("", ""))
        if self.style is ChatTemplateStyle.LLAMA2:
            user_prefix = self.role_prefix_and_suffix["user"][0]
            if role == "system" and not history:
                return user_prefix + prefix, suffix
            if role == "user" and len(history) == 1 and history[0]["role"] == "system":
                return "", suffix
        return prefix, suffix

    def get_prompt(self, messages: Sequence[dict]) -> str:
        """The full prompt text of `messages` (a system message with content None uses the default)."""
        text = ""
        for index, message in enumerate(messages):
            role, content = message["role"], message["content"]
            if role == "system" and content is None:
                if self.default_system_prompt is None:
                    continue
                content = self.default_system_prompt
            prefix, suffix = self.get_prefix_and_suffix(role, messages[:index])
            text += prefix + content + suffix
        return text


def _same_tags(start: str, end: str) -> dict[str, tuple[str, str]]:
    return {role: (start.format(role=role), end) for role in ("system", "user", "assistant")}


# Llama-2 and Mistral both wrap a user turn in [INST] ... [/INST] and close a reply with </s><s>.
_INST_TURNS = {"user": ("[INST] ", " [/INST]"), "assistant": ("", " </s><s>")}

BUILTIN_TEMPLATES = (
    ChatTemplate(
        "default",
        {"system": ("SYSTEM:", "\n"), "user": ("USER:", "\n"), "assistant": ("ASSISTANT:", "\n")},
    ),
    ChatTemplate("chatml", _same_tags("<|im_start|>{role}\n", "<|im_end|>\n"), stop_str=("<|im_end|>",)),
    ChatTemplate(
        "qwen",
        _same_tags("<|im_start|>{role}\n", "<|im_end|>\n"),
        default_system_prompt="You are a helpful assistant.",
        stop_str=("<|im_end|>",),
    ),
    ChatTemplate(
        "llama-3-instruct",
        _same_tags("<|start_header_id|>{role}<|end_header_id|>\n\n", "<|eot_id|>"),
        stop_str=("<|eot_id|>",),
        image_token="<|image|>",
    ),
    ChatTemplate(
        "mistral",
        {"system": ("[SYSTEM_PROMPT] ", " [/SYSTEM_PROMPT]"), **_INST_TURNS},
        stop_str=("</s>",),
        image_token="[IMG]",
    ),
    ChatTemplate(
        "llama-2-chat",
        {"system": ("<<SYS>>\n", "\n<</SYS>>\n\n"), **_INST_TURNS},
        style=ChatTemplateStyle.LLAMA2,
    ),
    ChatTemplate(
        "gemma-it",
        {
            "system": ("", ""),
            "user": ("<start_of_turn>user\n", "<end_of_turn>\n"),
            "assistant": ("<start_of_turn>model\n", "<end_of_turn>\n"),
        },
        stop_str=("<end_of_turn>",),
    ),
    ChatTemplate(
        "claude",
        {"system": ("", ""), "user": ("\n\nHuman: ", ""), "assistant": ("\n\nAssistant:", "")},
    ),
)


def _matcher(pattern: str, name: str, unless: str | None = None) -> Callable[[str], str | None]:
    compiled = re.compile(pattern)
    excluded = re.compile(unless) if unless else None

    def match(model_path: str) -> str | None:
        if compiled.search(model_path) and not (excluded and excluded.search(model_path)):
            return name
        return None

    return match


# Model path (lowercase) pattern -> template, unless the second pattern also matches. First hit wins.
_MODEL_PATH_RULES = (
    (r"llama-2.*chat|codellama.*instruct", "llama-2-chat", None),
    (r"pixtral|(mistral|mixtral).*instruct", "mistral", None),
    (r"llama-3.*instruct|llama3.*instruct", "llama-3-instruct", None),
    (r"tinyllama|smollm.*instruct|chatml", "chatml", None),
    (r"qwen.*(chat|instruct)", "qwen", r"llava"),
    (r"gemma.*it|gemma-3", "gemma-it", None),
)

# The registries start with the built-ins; `register_*` adds to them.
_TEMPLATES: dict[str, ChatTemplate] = {template.name: template for template in BUILTIN_TEMPLATES}
_MATCHERS: list[Callable[[str], str | None]] = [_matcher(*rule) for rule in _MODEL_PATH_RULES]


def register_chat_template(template: ChatTemplate) -> None:
    _TEMPLATES[template.name] = template


def register_chat_template_matching_function(matcher: Callable[[str], str | None]) -> None:
    """Adds a model-path matcher; matchers run in registration order and the first hit wins."""
    _MATCHERS.append(matcher)


def get_chat_template(name: str) -> ChatTemplate:
    try:
        return _TEMPLATES[name]
    except KeyError:
        raise KeyError(f"unknown chat template {name!r}; known: {sorted(_TEMPLATES)}") from None


def get_chat_template_by_model_path(model_path: str | None) -> ChatTemplate:
    """The template whose matcher accepts `model_path` (case-insensitive), else `default`."""
    if model_path:
        for matcher in _MATCHERS:
            name = matcher(model_path.lower())
            if name is not None:
                return get_chat_template(name)
    return get_chat_template("default")


def get_chat_template_by_tokenizer_template(jinja_template: str | None) -> ChatTemplate | None:
    """Recognizes the template family from the special tokens a tokenizer's Jinja template uses."""
    if not jinja_template:
        return None
    if "<|start_header_id|>" in jinja_template:
        return get_chat_template("llama-3-instruct")
    if "<|im_start|>" in jinja_template:
        return get_chat_template("chatml")
    if "<start_of_turn>" in jinja_template:
        return get_chat_template("gemma-it")
    if "<<SYS>>" in jinja_template:
        return get_chat_template("llama-2-chat")
    if "[INST]" in jinja_template:
        return get_chat_template("mistral")
    return None


def choose_chat_template(
    model_path: str | None = None, tokenizer_template: str | None = None, name: str | None = None
) -> ChatTemplate:
    """An explicit `name` wins, then the tokenizer's template, then the model path."""
    if name is not None:
        return get_chat_template(name)
    return get_chat_template_by_tokenizer_template(tokenizer_template) or get_chat_template_by_model_path(
        model_path
    )
