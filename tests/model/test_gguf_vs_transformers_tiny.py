"""Tiny GGUF files through our conversion and through `transformers`' own GGUF loader must give the
same weights, logits, token ids and chat prompts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf_testing import CORPUS, TinySpec, write_tiny_gguf

from sglr.model.gguf import convert_gguf

TEXTS = [*CORPUS, "  two leading spaces", "<|im_start|>user\nhi<|im_end|>\n", "x" * 40, ""]
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "5"},
    {"role": "user", "content": "And 7 + 8?"},
]


def load_both(tmp_path: Path, spec: TinySpec):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    write_tiny_gguf(tmp_path / "tiny.gguf", spec)
    convert_gguf(tmp_path / "tiny.gguf", tmp_path / "hf")
    ours = (
        AutoModelForCausalLM.from_pretrained(tmp_path / "hf"),
        AutoTokenizer.from_pretrained(tmp_path / "hf"),
    )
    theirs = (
        AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="tiny.gguf"),
        AutoTokenizer.from_pretrained(tmp_path, gguf_file="tiny.gguf"),
    )
    return ours, theirs


@pytest.mark.parametrize(
    "spec",
    [
        TinySpec(architecture="llama", pre_tokenizer="gpt2"),
        TinySpec(architecture="llama", pre_tokenizer="gpt2", tied_embeddings=False, add_bos=True),
        TinySpec(architecture="qwen2", pre_tokenizer="qwen2"),
    ],
    ids=["llama", "llama-untied-bos", "qwen2"],
)
def test_matches_transformers_gguf_loader(tmp_path, spec):
    (model, tokenizer), (reference_model, reference_tokenizer) = load_both(tmp_path, spec)

    reference_weights = reference_model.state_dict()
    for name, weight in model.state_dict().items():
        torch.testing.assert_close(weight, reference_weights[name], rtol=0, atol=0, msg=name)

    for text in TEXTS:
        ids = tokenizer(text).input_ids
        assert ids == reference_tokenizer(text).input_ids, text
        assert tokenizer.decode(ids) == reference_tokenizer.decode(ids)
    if spec.add_bos:
        assert tokenizer("hi").input_ids[0] == tokenizer.bos_token_id

    for add_generation_prompt in (False, True):
        prompt = tokenizer.apply_chat_template(
            MESSAGES, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        assert prompt == reference_tokenizer.apply_chat_template(
            MESSAGES, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    batch = tokenizer(CORPUS[:2], return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**batch).logits
        reference_logits = reference_model(**batch).logits
    torch.testing.assert_close(logits, reference_logits, rtol=1e-5, atol=1e-5)
