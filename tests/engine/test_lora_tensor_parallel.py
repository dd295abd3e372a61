"""LoRA adapters under tensor parallelism (gloo, 2 ranks in worker processes): every rank holds
its shard of each adapter (rows of lora_B on column-parallel projections, columns of lora_A on
row-parallel ones), a batch mixing the base model with adapters gives `transformers` +
`peft`'s greedy tokens, and adapters load and unload at run time through the workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglr.errors import UnknownLoraError
from sglr.testing.tiny import tiny_model_path
from sglr.testing.tiny_lora import peft_greedy, write_peft_adapter

GREEDY = {"temperature": 0, "max_new_tokens": 10, "ignore_eos": True}


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_tp2_mixed_adapter_batch_matches_peft(arch: str, make_engine, tmp_path: Path) -> None:
    base = tiny_model_path(arch, num_kv_heads=1)
    attention = write_peft_adapter(
        base, tmp_path / "attention", rank=8, target_modules=("q_proj", "k_proj", "v_proj", "o_proj"), seed=1
    )
    mlp = write_peft_adapter(
        base, tmp_path / "mlp", rank=4, target_modules=("gate_proj", "up_proj", "down_proj"), seed=2
    )
    engine = make_engine(
        base, tp_size=2, chunked_prefill_size=16, lora_paths=[f"attention={attention}", f"mlp={mlp}"]
    )
    try:
        prompts = ["The quick brown fox jumps over the lazy dog again and again", "def main():", "Once upon"]
        names = ["attention", None, "mlp"]
        paths = {"attention": attention, "mlp": mlp, None: None}
        outs = engine.generate(prompts, GREEDY, lora_path=names)
        for prompt, name, out in zip(prompts, names, outs, strict=True):
            ids = engine.tokenizer.encode(prompt)
            assert out["output_ids"] == peft_greedy(base, paths[name], ids, GREEDY["max_new_tokens"]), name
        again = engine.generate(prompts[0], GREEDY, lora_path="attention")  # from the prefix cache
        assert again["output_ids"] == outs[0]["output_ids"]
        assert again["meta_info"]["cached_tokens"] > 0
        # Loaded and unloaded at run time, through the workers, on both ranks.
        late = write_peft_adapter(
            base, tmp_path / "late", rank=6, target_modules=("q_proj", "down_proj"), seed=3
        )
        engine.load_lora_adapter("late", str(late))
        ids = engine.tokenizer.encode(prompts[1])
        out = engine.generate(prompts[1], GREEDY, lora_path="late")
        assert out["output_ids"] == peft_greedy(base, late, ids, GREEDY["max_new_tokens"])
        engine.unload_lora_adapter("late")
        with pytest.raises(UnknownLoraError):
            engine.generate(prompts[1], GREEDY, lora_path="late")
        engine.check_invariants()
    finally:
        engine.shutdown()
