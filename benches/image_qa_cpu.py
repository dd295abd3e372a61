"""Questions about one image (or one video), prefix cache on vs off: time to first token on a
tiny LLaVA (LLaVA-1.5 for the image rows, LLaVA-NeXT-Video for the video rows).

The SGLang paper's multimodal shapes: several questions about the same image or video, so every
request after the first shares the media (hundreds of tokens) and the text before it. With the
cache keyed by content, a follow-up prefills only its question and skips the vision tower; with
the cache off, every request encodes the media and prefills all of it again.

Workloads (one image or one video of F frames, Q questions, a few output tokens each):
- sequential: the questions one after another (a user asking follow-ups); TTFT of each
  follow-up (the first question is cold in both systems and reported apart);
- parallel: all Q questions at once (a batch) about media seen once before: time until every
  question has its first token.

Both systems run the same requests on their own engine (same weights, one process, one after
the other), each warmed up on different media first.

    python benches/image_qa_cpu.py                      # 576 image tokens (LLaVA-1.5's 336 px / 14)
    python benches/image_qa_cpu.py --questions 4 --image-size 168 --video-frames 0   # images only

`benches/run_workloads.py` runs it too (its multimodal section; sizes per profile).
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
from sglr.testing.tiny_llava import write_llava_checkpoint

SYSTEMS = {"cache": {}, "no-cache": {"disable_radix_cache": True}}
FAMILIES = {"image": "llava", "video": "llava_next_video"}
QUESTIONS = [
    "What is in the picture?", "Which colour stands out most?", "Is it day or night?",
    "How many objects can you count?", "Describe the texture.", "Where might this be?",
    "What happens next?", "Give it a title.", "Is anything moving?", "What is in the corner?",
]  # fmt: skip


def picture(seed: int, size: int):  # a PIL image
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size + 37, size + 91, 3), dtype=np.uint8))


def make_media(kind: str, seed: int, args: argparse.Namespace):
    if kind == "image":
        return picture(seed, args.image_size)
    return [picture(seed * 1000 + f, args.image_size) for f in range(args.video_frames)]


def prompt(question: str, kind: str) -> str:
    return f"<|im_start|>user\nLook at this: <{kind}>\n{question}<|im_end|>\n<|im_start|>assistant\n"


def media_args(kind: str, media, num_prompts: int) -> dict:
    """`image_data` (one image) or `video_data` (one video of frames) for each prompt."""
    return {f"{kind}_data": [[media]] * num_prompts}


def first_token_times(
    engine: Engine, questions: list[str], media, kind: str, max_new_tokens: int
) -> tuple[list[float], list[int]]:
    """Submits the questions together; seconds until each has its first token, and its cached tokens."""
    params = {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True}
    texts = [prompt(q, kind) for q in questions]
    start = time.perf_counter()
    stream = engine.generate(texts, params, **media_args(kind, media, len(texts)), stream=True)
    firsts: dict[int, float] = {}
    cached: dict[int, int] = {}
    for chunk in stream:
        index = chunk.get("index", 0)
        if index not in firsts and chunk["output_ids"]:
            firsts[index] = time.perf_counter() - start
        cached[index] = chunk["meta_info"]["cached_tokens"]
    return [firsts[i] for i in range(len(texts))], [cached[i] for i in range(len(texts))]


def run_system(model_dir: Path, options: dict, args: argparse.Namespace, kind: str) -> dict[str, float]:
    engine = Engine(model_path=str(model_dir), device="cpu", max_total_tokens=65536, **options)
    try:
        new = args.max_new_tokens
        media = make_media(kind, args.seed, args)
        first_token_times(engine, ["warm-up"], make_media(kind, args.seed + 1000, args), kind, new)
        questions = (QUESTIONS * ((args.questions // len(QUESTIONS)) + 1))[: args.questions]
        cold, _ = first_token_times(engine, questions[:1], media, kind, new)
        probe = engine.generate(
            [prompt(questions[0], kind)], {"max_new_tokens": 0}, **media_args(kind, media, 1)
        )
        follow_ttft, follow_cached = [], []
        for question in questions[1:]:
            ttft, cached = first_token_times(engine, [question], media, kind, new)
            follow_ttft += ttft
            follow_cached += cached
        media_b = make_media(kind, args.seed + 1, args)
        first_token_times(engine, questions[:1], media_b, kind, new)  # seen once
        parallel, parallel_cached = first_token_times(engine, questions, media_b, kind, new)
        return {
            "cold_ms": 1000 * cold[0],
            "follow_ms": 1000 * statistics.mean(follow_ttft),
            "follow_cached": statistics.mean(follow_cached),
            "parallel_ms": 1000 * max(parallel),
            "parallel_cached": statistics.mean(parallel_cached),
            "prompt_tokens": probe[0]["meta_info"]["prompt_tokens"],
        }
    finally:
        engine.shutdown()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=336)
    parser.add_argument("--patch-size", type=int, default=14)
    parser.add_argument(
        "--video-frames", type=int, default=8, help="frames of the video rows (0: no video rows)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="also write the table here (markdown)")
    return parser.parse_args(argv)


def measure(args: argparse.Namespace, command: str) -> str:
    """Runs both systems on the image (and video) workloads; the markdown table."""
    import torch

    kinds = ["image", "video"] if args.video_frames else ["image"]
    results: dict[tuple[str, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            model_dir = write_llava_checkpoint(
                Path(tmp) / kind,
                seed=args.seed,
                family=FAMILIES[kind],
                text={"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 8,
                      "num_key_value_heads": 4},
                vision={"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4,
                        "num_attention_heads": 8, "image_size": args.image_size, "patch_size": args.patch_size},
            )  # fmt: skip
            for name, options in SYSTEMS.items():
                results[kind, name] = run_system(model_dir, options, args, kind)
    side = args.image_size // args.patch_size
    lines = [
        "# Questions about one image or video: prefix cache on vs off (tiny LLaVA, CPU)",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads  ",
        f"Models: CLIP 4 x 256 and Llama 4 x 256; image: LLaVA-1.5, {args.image_size} px / {args.patch_size} = "
        f"{side**2} tokens; video: LLaVA-NeXT-Video, {args.video_frames} frames x {(side // 2) ** 2} tokens; "
        f"{args.questions} questions, {args.max_new_tokens} output tokens each",
        "",
        "| workload | system | prompt tokens | first question TTFT (ms) | follow-up TTFT (ms) "
        "| cached tokens / follow-up | all-at-once: last first token (ms) | cached tokens / question |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (kind, name), row in results.items():
        lines.append(
            f"| {kind} QA | {name} | {row['prompt_tokens']} | {row['cold_ms']:.1f} | {row['follow_ms']:.1f} "
            f"| {row['follow_cached']:.0f} | {row['parallel_ms']:.1f} | {row['parallel_cached']:.0f} |"
        )
    lines.append("")
    for kind in kinds:
        cache, base = results[kind, "cache"], results[kind, "no-cache"]
        lines.append(
            f"{kind.capitalize()} QA: follow-up TTFT no-cache / cache **{base['follow_ms'] / cache['follow_ms']:.2f}x**; "
            f"all-at-once **{base['parallel_ms'] / cache['parallel_ms']:.2f}x**.  "
        )
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    table = measure(args, "python " + shlex.join(["benches/image_qa_cpu.py", *sys.argv[1:]]))
    print(table)
    if args.output is not None:
        args.output.write_text(table + "\n")


if __name__ == "__main__":
    main()
