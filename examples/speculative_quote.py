"""Speculative decoding where it pays: the model quotes a passage back, and NGRAM drafts copied
from the prompt are verified several tokens per forward pass. The same request runs on an
engine without speculation and on one with `speculative_algorithm="NGRAM"`; the greedy tokens
are identical, the second needs fewer passes.

    python examples/speculative_quote.py [--model-path PATH] [--device cpu]
"""

from __future__ import annotations

import time

import sglr as sgl
from lang_backends import example_args

PASSAGE = (
    "The committee met on Tuesday to review the budget for the coming year. After a long discussion, "
    "the members agreed to increase funding for the public library by ten percent, to repair the bridge "
    "on Main Street, and to hire two new teachers for the elementary school. The vote was seven to two."
)
PARAMS = {"temperature": 0, "max_new_tokens": 72}


def main(argv=None) -> dict:
    args, _ = example_args(__doc__, argv)
    runs = {}
    for name, options in (("off", {}), ("NGRAM", {"speculative_algorithm": "NGRAM"})):
        engine = sgl.Engine(model_path=args.model_path, device=args.device, **options)
        try:
            messages = [{"role": "user", "content": f"Repeat this passage exactly:\n\n{PASSAGE}"}]
            prompt = engine.tokenizer.apply_chat_template(messages)
            engine.generate(prompt, {"max_new_tokens": 1})  # the prompt cached: decode alone is timed
            started = time.perf_counter()
            out = engine.generate(prompt, PARAMS)
            seconds = time.perf_counter() - started
        finally:
            engine.shutdown()
        meta = out["meta_info"]
        runs[name] = {"output_ids": out["output_ids"], "tokens_per_s": meta["completion_tokens"] / seconds,
                      "passes": meta.get("spec_verify_ct"), "accepted": meta.get("spec_accepted_tokens", 0)}  # fmt: skip
        print(f"{name:>5}: {meta['completion_tokens']} tokens at {runs[name]['tokens_per_s']:.1f} tokens/s")
    spec = runs["NGRAM"]
    summary = {
        "identical": spec["output_ids"] == runs["off"]["output_ids"],
        "speedup": spec["tokens_per_s"] / runs["off"]["tokens_per_s"],
        "accepted_drafts": spec["accepted"],
        "decode_passes": spec["passes"],
    }
    print(
        f"NGRAM: {summary['speedup']:.2f}x, {spec['accepted']} drafts accepted over {spec['passes']} decode "
        f"passes, output identical: {summary['identical']}"
    )
    return summary


if __name__ == "__main__":
    main()
