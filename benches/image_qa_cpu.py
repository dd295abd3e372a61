"""Questions about one image, prefix cache on vs off: time to first token on a tiny LLaVA.

The SGLang paper's multimodal shape: several questions about the same image, so every request
after the first shares the image (hundreds of tokens) and the text before it. With the cache
keyed by image content, a follow-up prefills only its question and skips the vision tower; with
the cache off, every request encodes the image and prefills all of it again.

Workloads (one image, Q questions, a few output tokens each):
- sequential: the questions one after another (a user asking follow-ups); TTFT of each
  follow-up (the first question is cold in both systems and reported apart);
- parallel: all Q questions at once (a batch): time until every question has its first token.

Both systems run the same requests on their own engine (same weights, one process, one after
the other), each warmed up on a different image first.

    python benches/image_qa_cpu.py                      # 576 image tokens (LLaVA-1.5's 336 px / 14)
    python benches/image_qa_cpu.py --questions 4 --image-size 168
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import numpy as np

from sglr.engine.engine import Engine
from sglr.model.tiny_llava import write_llava_checkpoint

SYSTEMS = {"cache": {}, "no-cache": {"disable_radix_cache": True}}
QUESTIONS = [
    "What is in the picture?", "Which colour stands out most?", "Is it day or night?",
    "How many objects can you count?", "Describe the texture.", "Where might this be?",
    "What happens next?", "Give it a title.", "Is anything moving?", "What is in the corner?",
]  # fmt: skip


def picture(seed: int, size: int):  # a PIL image
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size + 37, size + 91, 3), dtype=np.uint8))


def prompt(question: str) -> str:
    return f"<|im_start|>user\nLook at this: <image>\n{question}<|im_end|>\n<|im_start|>assistant\n"


def first_token_times(
    engine: Engine, questions: list[str], image, max_new_tokens: int
) -> tuple[list[float], list[int]]:
    """Submits the questions together; seconds until each has its first token, and its cached tokens."""
    params = {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}
    texts = [prompt(q) for q in questions]
    start = time.perf_counter()
    stream = engine.generate(texts, params, image_data=[[image]] * len(texts), stream=True)
    firsts: dict[int, float] = {}
    cached: dict[int, int] = {}
    for chunk in stream:
        index = chunk.get("index", 0)
        if index not in firsts and chunk["output_ids"]:
            firsts[index] = time.perf_counter() - start
        cached[index] = chunk["meta_info"]["cached_tokens"]
    return [firsts[i] for i in range(len(texts))], [cached[i] for i in range(len(texts))]


def run_system(model_dir: Path, options: dict, args: argparse.Namespace) -> dict[str, float]:
    engine = Engine(model_path=str(model_dir), device="cpu", max_total_tokens=32768, **options)
    try:
        image = picture(args.seed, args.image_size)
        first_token_times(
            engine, ["warm-up"], picture(args.seed + 1000, args.image_size), args.max_new_tokens
        )
        questions = (QUESTIONS * ((args.questions // len(QUESTIONS)) + 1))[: args.questions]
        cold, _ = first_token_times(engine, questions[:1], image, args.max_new_tokens)
        prompt_tokens = engine.generate(prompt(questions[0]), {"max_new_tokens": 0}, image_data=image)[
            "meta_info"
        ]["prompt_tokens"]
        follow_ttft, follow_cached = [], []
        for question in questions[1:]:
            ttft, cached = first_token_times(engine, [question], image, args.max_new_tokens)
            follow_ttft += ttft
            follow_cached += cached
        image_b = picture(args.seed + 1, args.image_size)
        first_token_times(engine, questions[:1], image_b, args.max_new_tokens)  # the image seen once
        parallel, parallel_cached = first_token_times(engine, questions, image_b, args.max_new_tokens)
        return {
            "cold_ms": 1000 * cold[0],
            "follow_ms": 1000 * statistics.mean(follow_ttft),
            "follow_cached": statistics.mean(follow_cached),
            "parallel_ms": 1000 * max(parallel),
            "parallel_cached": statistics.mean(parallel_cached),
            "prompt_tokens": prompt_tokens,
        }
    finally:
        engine.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=336)
    parser.add_argument("--patch-size", type=int, default=14)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="also write the table here (markdown)")
    args = parser.parse_args()
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = write_llava_checkpoint(
            Path(tmp) / "llava",
            seed=args.seed,
            text={"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 8,
                  "num_key_value_heads": 4},
            vision={"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
                    "image_size": args.image_size, "patch_size": args.patch_size},
        )  # fmt: skip
        results = {name: run_system(model_dir, options, args) for name, options in SYSTEMS.items()}
    cache, base = results["cache"], results["no-cache"]
    lines = [
        "# Questions about one image: prefix cache on vs off (tiny LLaVA, CPU)",
        "",
        f"Command: `python {shlex.join(['benches/image_qa_cpu.py', *sys.argv[1:]])}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads  ",
        f"Model: LLaVA (CLIP 4 x 256, Llama 4 x 256), {args.image_size} px / {args.patch_size} = "
        f"{(args.image_size // args.patch_size) ** 2} image tokens; prompt {cache['prompt_tokens']} tokens; "
        f"{args.questions} questions, {args.max_new_tokens} output tokens each",
        "",
        "| workload | system | first question TTFT (ms) | follow-up TTFT (ms) | cached tokens / follow-up "
        "| all-at-once: last first token (ms) | cached tokens / question |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in results.items():
        lines.append(
            f"| image QA | {name} | {row['cold_ms']:.1f} | {row['follow_ms']:.1f} | {row['follow_cached']:.0f} "
            f"| {row['parallel_ms']:.1f} | {row['parallel_cached']:.0f} |"
        )
    lines += [
        "",
        f"Follow-up TTFT, no-cache / cache: **{base['follow_ms'] / cache['follow_ms']:.2f}x**; "
        f"all-at-once, no-cache / cache: **{base['parallel_ms'] / cache['parallel_ms']:.2f}x**.",
    ]
    table = "\n".join(lines)
    print(table)
    if args.output is not None:
        args.output.write_text(table + "\n")


if __name__ == "__main__":
    main()
