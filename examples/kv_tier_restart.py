"""The KV cache outlives the process: an engine with the file-backed second tier answers a
question about a long document, shuts down, and a new engine on the same directory answers the
same question with the document's KV read from disk instead of recomputed (identical tokens).

    python examples/kv_tier_restart.py [--model-path PATH] [--device cpu]
"""

from __future__ import annotations

import tempfile
import time

import sglr as sgl
from lang_backends import example_args

CLAUSE = (
    "Clause {n}. The tenant keeps the premises in good repair, pays the rent on the first day of "
    "each month, and gives the landlord thirty days of notice before any change of use."
)
DOCUMENT = " ".join(CLAUSE.format(n=n) for n in range(1, 31))
QUESTION = "Question: according to the lease above, how many days of notice does the tenant give?"
PARAMS = {"temperature": 0, "max_new_tokens": 16}


def main(argv=None) -> dict:
    args, _ = example_args(__doc__, argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="sglr-kv-") as storage:
        for name in ("first run", "after a restart"):
            engine = sgl.Engine(
                model_path=args.model_path,
                device=args.device,
                enable_hierarchical_cache=True,
                hicache_storage_backend="file",
                hicache_storage_dir=storage,
                hicache_storage_prefetch_policy="wait_complete",  # the restart shows the tier's best
            )
            try:
                messages = [{"role": "user", "content": f"Lease:\n{DOCUMENT}\n\n{QUESTION}"}]
                prompt = engine.tokenizer.apply_chat_template(messages)
                started = time.perf_counter()
                out = engine.generate(prompt, PARAMS)
                seconds = time.perf_counter() - started
                stats = engine.get_stats()
            finally:
                engine.shutdown()  # written pages are flushed: the next engine finds them
            meta = out["meta_info"]
            runs.append({"output_ids": out["output_ids"], "seconds": seconds,
                         "cached_tokens": meta["cached_tokens"], "prompt_tokens": meta["prompt_tokens"],
                         "tier_tokens": stats["hicache_loaded_tokens"]})  # fmt: skip
            print(
                f"{name:>15}: {meta['prompt_tokens']} prompt tokens, {meta['cached_tokens']} cached "
                f"({stats['hicache_loaded_tokens']} read from disk), {seconds:.2f} s: {out['text'].strip()!r}"
            )
    cold, warm = runs
    summary = {
        "identical": cold["output_ids"] == warm["output_ids"],
        "cached_after_restart": warm["cached_tokens"],
        "tier_tokens_after_restart": warm["tier_tokens"],
        "speedup": cold["seconds"] / warm["seconds"],
    }
    print(
        f"restart: {summary['speedup']:.1f}x faster with the stored KV, output identical: {summary['identical']}"
    )
    return summary


if __name__ == "__main__":
    main()
