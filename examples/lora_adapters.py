"""Several LoRA adapters on one base model: two adapters (random weights in PEFT's layout, written
here: no fine-tune of SmolLM2 ships offline) are loaded while the engine runs, then one batch
sends the same question to the base model and to each adapter, all in the same forward passes.
Each adapter answers differently; asked again, each reuses only its own cached prompt; an
unloaded adapter is refused, never answered by the base.

    python examples/lora_adapters.py [--model-path PATH] [--device cpu]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import sglr as sgl
from lang_backends import example_args
from sglr.errors import UnknownLoraError
from sglr.testing.tiny_lora import write_random_adapter

QUESTION = "Name three things people often keep in a kitchen drawer."
PARAMS = {"temperature": 0, "max_new_tokens": 24}
ADAPTERS = {"alpha": (8, 1), "beta": (16, 2)}  # name: (rank, seed)


def main(argv=None) -> dict:
    args, _ = example_args(__doc__, argv)
    engine = sgl.Engine(model_path=args.model_path, device=args.device, enable_lora=True)
    try:
        with tempfile.TemporaryDirectory(prefix="sglr-lora-example-") as folder:
            for name, (rank, seed) in ADAPTERS.items():
                path = write_random_adapter(engine.runner.config, Path(folder) / name, rank=rank,
                                            target_modules=("q_proj", "v_proj", "down_proj"), seed=seed, scale=0.15)  # fmt: skip
                engine.load_lora_adapter(name, str(path))
            prompt = engine.tokenizer.apply_chat_template([{"role": "user", "content": QUESTION}])
            who = [None, *ADAPTERS]
            first = engine.generate([prompt] * len(who), PARAMS, lora_path=who)
            again = engine.generate([prompt] * len(who), PARAMS, lora_path=who)
            for name, out in zip(who, first, strict=True):
                print(f"{name or 'base':>5}: {out['text'].strip()!r}")
            cached = {
                name or "base": out["meta_info"]["cached_tokens"]
                for name, out in zip(who, again, strict=True)
            }
            print(f"asked again, cached prompt tokens per adapter: {cached}")
            engine.unload_lora_adapter("beta")
            try:
                engine.generate(prompt, PARAMS, lora_path="beta")
                refused = False
            except UnknownLoraError as exc:
                refused = True
                print(f"after unloading beta: {exc}")
    finally:
        engine.shutdown()
    texts = [out["text"] for out in first]
    return {
        "distinct_answers": len(set(texts)),
        "same_when_asked_again": [a["output_ids"] for a in again] == [f["output_ids"] for f in first],
        "cached_again": cached,
        "unloaded_refused": refused,
    }


if __name__ == "__main__":
    main()
