"""Speculative decoding with LoRA adapters: drafts are verified with each request's adapter, so a
batch mixing adapters and the base keeps `peft`'s greedy tokens while drafts that hold the answer
are accepted (the oracle drafter proposes peft's continuation among decoys)."""

from __future__ import annotations

from pathlib import Path

from oracle_drafter import FlatCosts, OracleDrafter

from sglr.testing.tiny_lora import peft_greedy, write_peft_adapter

GREEDY = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}


def test_verify_passes_use_each_requests_adapter(tiny_dir: Path, tmp_path: Path, make_engine) -> None:
    adapters = {
        "attn": write_peft_adapter(
            tiny_dir, tmp_path / "attn", rank=8, target_modules=("q_proj", "v_proj"), seed=1
        ),
        "mlp": write_peft_adapter(tiny_dir, tmp_path / "mlp", rank=4, target_modules=("down_proj",), seed=2),
    }
    engine = make_engine(
        tiny_dir, speculative_algorithm="NGRAM", lora_paths=[f"{n}={p}" for n, p in adapters.items()]
    )
    prompts = [list(range(30, 52)), list(range(60, 75)), list(range(90, 101))]
    names = ["attn", None, "mlp"]
    expected = [
        peft_greedy(tiny_dir, adapters[n] if n else None, p, GREEDY["max_new_tokens"])
        for p, n in zip(prompts, names, strict=True)
    ]
    speculator = engine._scheduler._speculator
    speculator.drafter = OracleDrafter(
        [p + e for p, e in zip(prompts, expected, strict=True)], engine.runner.vocab_size
    )
    speculator.budget.costs = FlatCosts()  # drafts whatever passes cost: not timing-dependent
    outs = engine.generate(input_ids=prompts, sampling_params=GREEDY, lora_path=names)
    assert [o["output_ids"] for o in outs] == expected
    assert all(o["meta_info"]["spec_accepted_tokens"] > 0 for o in outs)
    engine.check_invariants()
