"""Chat templates: selection by tokenizer template and model name, and their text format."""

from __future__ import annotations

import pytest

from sglr.lang.chat_template import (
    choose_chat_template,
    get_chat_template,
    get_chat_template_by_model_path,
)


@pytest.mark.parametrize(
    ("model_path", "name"),
    [
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3-instruct"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-chat"),
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "chatml"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "chatml"),
        ("google/gemma-2-2b-it", "gemma-it"),
        ("gpt-4o-mini", "default"),
        ("some/unknown-model", "default"),
        (None, "default"),
    ],
)
def test_template_by_model_path(model_path, name):
    assert get_chat_template_by_model_path(model_path).name == name


@pytest.mark.parametrize(
    ("jinja", "name"),
    [
        ("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}", "llama-3-instruct"),
        ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}", "chatml"),
        ("{{ bos_token }}[INST] {{ content }} [/INST]", "mistral"),
        ("[INST] <<SYS>>\n{{ system }}\n<</SYS>>", "llama-2-chat"),
    ],
)
def test_tokenizer_template_wins_over_model_name(jinja, name):
    assert choose_chat_template(model_path="unknown/model", tokenizer_template=jinja).name == name
    assert (
        choose_chat_template(model_path="Qwen/Qwen2-7B-Instruct", tokenizer_template="plain").name == "qwen"
    )
    assert choose_chat_template(model_path="Qwen/Qwen2-7B-Instruct", name="mistral").name == "mistral"


def test_prompts_of_the_main_templates():
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
    ]
    assert get_chat_template("llama-3-instruct").get_prompt(messages) == (
        "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|>"
    )
    assert get_chat_template("mistral").get_prompt(messages[1:]) == "[INST] U [/INST]A </s><s>"
    assert get_chat_template("default").get_prompt(messages) == "SYSTEM:S\nUSER:U\nASSISTANT:A\n"
    # Llama-2 folds the system block into the first [INST].
    assert get_chat_template("llama-2-chat").get_prompt(messages) == (
        "[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST]A </s><s>"
    )
    qwen = get_chat_template("qwen")
    assert qwen.get_prompt([{"role": "system", "content": None}]) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    )
    assert qwen.stop_str == ("<|im_end|>",)
    with pytest.raises(KeyError, match="unknown chat template"):
        get_chat_template("nope")
