"""The embedded default, SmolLM2-135M-Instruct (GGUF, Q4_1/Q8_0/F32), converted by sglr and loaded
by `transformers`, must behave exactly like `transformers` loading the GGUF file itself."""

from __future__ import annotations

import json

import pytest
import torch

from sglr.model.default_model import default_gguf_path

PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "What is 3 + 4?"}],
    [
        {"role": "system", "content": "You answer with a short list."},
        {"role": "user", "content": "Name three colors."},
    ],
]
TEXTS = [
    "Hello world!",
    "  leading spaces, 12345 digits and 3.14159",
    "naïve café — “quotes” 日本語 🙂",
    "<|im_start|>user\nhi<|im_end|>\n",
    "tab\tnew\n\nline  \n   ",
    "def f(x):\n    return x ** 2  # square\n",
    "I'm sure they've gone; we'll see.",
]
NUM_NEW_TOKENS = 12


@pytest.fixture(scope="session")
def ours(smollm2_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    return model, AutoTokenizer.from_pretrained(smollm2_dir)


@pytest.fixture(scope="session")
def reference():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = default_gguf_path()
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name).eval()
    return model, AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)


def test_config_matches_the_published_model(smollm2_dir):
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["model_type"] == "llama"
    expected = {
        "num_hidden_layers": 30,
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "rope_theta": 1e5,
        "max_position_embeddings": 8192,
        "vocab_size": 49152,
    }
    assert {key: config[key] for key in expected} == expected
    assert config["tie_word_embeddings"] is True


def test_weights_equal_transformers_dequantization(ours, reference):
    reference_weights = reference[0].state_dict()
    weights = ours[0].state_dict()
    assert set(weights) == set(reference_weights)
    for name, weight in weights.items():
        torch.testing.assert_close(weight, reference_weights[name], rtol=0, atol=0, msg=name)


def test_tokenizer_matches_transformers_gguf_tokenizer(ours, reference):
    tokenizer, reference_tokenizer = ours[1], reference[1]
    assert len(tokenizer) == len(reference_tokenizer)
    assert tokenizer.bos_token == reference_tokenizer.bos_token
    assert tokenizer.eos_token == reference_tokenizer.eos_token
    for text in TEXTS:
        ids = tokenizer(text).input_ids
        assert ids == reference_tokenizer(text).input_ids, text
        assert tokenizer.decode(ids) == reference_tokenizer.decode(ids) == text
        assert tokenizer.decode(ids, skip_special_tokens=True) == reference_tokenizer.decode(
            ids, skip_special_tokens=True
        )


@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_chat_template_matches_transformers(ours, reference, add_generation_prompt):
    conversations = [
        *PROMPTS,
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Say 'ok'."},
        ],
    ]
    tokenizer, reference_tokenizer = ours[1], reference[1]
    for messages in conversations:
        for tokenize in (False, True):
            settings = {"add_generation_prompt": add_generation_prompt, "tokenize": tokenize}
            rendered = tokenizer.apply_chat_template(messages, **settings)
            assert rendered == reference_tokenizer.apply_chat_template(messages, **settings)


def _chat_ids(tokenizer, messages) -> torch.Tensor:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, return_tensors="pt").input_ids


def _greedy(model, tokenizer, input_ids: torch.Tensor, num_new_tokens: int) -> torch.Tensor:
    settings = {"max_new_tokens": num_new_tokens, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    return model.generate(input_ids, **settings)


def test_logits_and_greedy_tokens_match_transformers(ours, reference):
    (model, tokenizer), (reference_model, _) = ours, reference
    for messages in PROMPTS:
        input_ids = _chat_ids(tokenizer, messages)
        with torch.no_grad():
            logits = model(input_ids).logits
            reference_logits = reference_model(input_ids).logits
        torch.testing.assert_close(logits, reference_logits, rtol=1e-4, atol=1e-4)
        output = _greedy(model, tokenizer, input_ids, NUM_NEW_TOKENS)
        reference_output = _greedy(reference_model, tokenizer, input_ids, NUM_NEW_TOKENS)
        assert output.tolist() == reference_output.tolist(), messages


def test_answers_the_capital_of_france(ours):
    model, tokenizer = ours
    input_ids = _chat_ids(tokenizer, PROMPTS[0])
    output = _greedy(model, tokenizer, input_ids, 16)
    answer = tokenizer.decode(output[0, input_ids.shape[1] :], skip_special_tokens=True)
    assert answer.strip() == "The capital of France is Paris."
