"""The runner on a real checkpoint: the embedded default SmolLM2-135M-Instruct (GGUF converted to a
Hugging Face-format directory: tied embeddings, GQA 9:3, 30 layers) against `transformers`."""

from __future__ import annotations

from pathlib import Path

from hf_twin import hf_greedy

from sglr.engine.offline import generate_token_ids as generate
from sglr.model.runner import ModelRunner, RunnerConfig

NUM_NEW = 8


def test_smollm2_greedy_matches_transformers_batched(smollm2_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    conversations = [
        [{"role": "user", "content": "What is the capital of France?"}],
        [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "List two primes."}],
    ]
    prompts = [
        tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=True, return_dict=False)
        for c in conversations
    ]
    runner = ModelRunner(RunnerConfig(smollm2_dir, device="cpu", kv_num_tokens=1024, max_num_reqs=4))
    assert runner.config.tie_word_embeddings and runner.config.num_key_value_heads == 3
    expected = [hf_greedy(smollm2_dir, p, NUM_NEW) for p in prompts]
    assert generate(runner, prompts, NUM_NEW) == expected
    assert generate(runner, prompts[:1], NUM_NEW, prefill_chunk=7) == expected[:1]
    assert "Paris" in tokenizer.decode(expected[0])
