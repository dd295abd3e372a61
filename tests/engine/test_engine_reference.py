"""The engine against Hugging Face `transformers` on the same tiny weights: greedy tokens,
prompt logprobs (SGLang's alignment: entry 0 is null) and output logprobs."""

from __future__ import annotations

import pytest
import torch

from sglr.engine.engine import Engine

PROMPTS = ["The quick brown fox jumps over", "import os\nimport sys\n\ndef main():"]


@pytest.fixture(scope="module")
def hf_model(tiny_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_dir), torch_dtype=torch.float32).eval()


def hf_logprobs(hf_model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = hf_model(torch.tensor([ids])).logits[0]
    return torch.log_softmax(logits.float(), dim=-1)


def test_greedy_tokens_match_transformers(engine: Engine, hf_model) -> None:
    for prompt in PROMPTS:
        ids = engine.tokenizer.encode(prompt)
        with torch.no_grad():
            ref = hf_model.generate(
                torch.tensor([ids]), max_new_tokens=16, do_sample=False, min_new_tokens=16
            )
        out = engine.generate(prompt, {"temperature": 0, "max_new_tokens": 16, "ignore_eos": True})
        assert out["output_ids"] == ref[0, len(ids) :].tolist()


@pytest.mark.parametrize("start", [0, 3])
def test_prompt_logprobs_match_log_softmax(engine: Engine, hf_model, start: int) -> None:
    prompt = PROMPTS[1]
    ids = engine.tokenizer.encode(prompt)
    engine.generate(prompt, {"max_new_tokens": 0})  # cached: the engine must still compute from `start`
    out = engine.generate(
        prompt,
        {"max_new_tokens": 3, "temperature": 0, "ignore_eos": True},
        return_logprob=True,
        logprob_start_len=start,
        top_logprobs_num=2,
        return_text_in_logprobs=True,
    )
    meta = out["meta_info"]
    entries = meta["input_token_logprobs"]
    assert len(entries) == len(ids) - start
    assert entries[0][0] is None and entries[0][1] == ids[start]
    ref = hf_logprobs(hf_model, ids + out["output_ids"])
    for k, (logprob, token_id, text) in enumerate(entries[1:], start=start + 1):
        assert token_id == ids[k]
        assert logprob == pytest.approx(ref[k - 1, ids[k]].item(), abs=1e-4)
        assert text == engine.tokenizer.decode([token_id], skip_special_tokens=False)
    for j, (logprob, token_id, _) in enumerate(meta["output_token_logprobs"]):
        assert logprob == pytest.approx(ref[len(ids) + j - 1, token_id].item(), abs=1e-4)
    top = meta["output_top_logprobs"][0]
    assert len(top) == 2 and top[0][0] >= top[1][0]
    assert top[0][1] == out["output_ids"][0]  # greedy picks the top token
    values = [e[0] for e in entries if e[0] is not None]
    assert meta["normalized_prompt_logprob"] == pytest.approx(sum(values) / len(values))


def test_prompt_logprobs_across_chunks(tiny_dir, make_engine, engine: Engine, hf_model) -> None:
    prompt = " ".join(PROMPTS * 5)
    ids = engine.tokenizer.encode(prompt)
    chunked = make_engine(tiny_dir, chunked_prefill_size=8)
    try:
        out = chunked.generate(prompt, {"max_new_tokens": 0}, return_logprob=True, logprob_start_len=0)
    finally:
        chunked.shutdown()
    entries = out["meta_info"]["input_token_logprobs"]
    ref = hf_logprobs(hf_model, ids)
    assert len(entries) == len(ids)
    for k in range(1, len(ids)):
        assert entries[k][0] == pytest.approx(ref[k - 1, ids[k]].item(), abs=1e-4)
