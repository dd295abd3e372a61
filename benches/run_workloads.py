"""The SGLang paper's workloads on sglr, its ablations and baselines, in one run: one table, one chart.

    python benches/run_workloads.py --profile cpu      # tiny model on CPU, a few minutes
    python benches/run_workloads.py --profile gpu      # Llama-3-8B shapes, dummy weights, one CUDA GPU
    python benches/run_workloads.py --profile smoke    # seconds (tests/benches runs it)
    python benches/run_workloads.py --profile cpu --workloads few-shot,react --systems sglr,no-cache

The cpu profile also runs the multimodal workloads (`image_qa_cpu.py`: questions about one image
and about one video on a tiny LLaVA, cache on vs off) as a section of its own
(`--no-multimodal` skips them; `--multimodal` adds them to the smoke profile).

Every system runs every workload it applies to (see benchlib/systems.py), one cell at a time,
with the prefix cache flushed before each cell. Writes `table.md` (machine, command, tables),
`results.json` and `chart.png` (programs/s normalized to the best system per workload) to
`--output-dir` (default: benches/results/<profile>).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchlib.hit_rate import optimal_hit_rate
from benchlib.systems import BASELINE, SYSTEMS, System
from benchlib.workload_report import Row, engine_deltas, markdown_table, shapes_table, work_table, write_chart
from workloads.base import ServingWorkload
from workloads.registry import BUILDERS

BENCHES_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Profile:
    """model: a seeded test model (benchlib.bench_models.TINY_MODELS, real weights) or a
        benches/model_gpu.py preset (dummy weights).

    transformers_max_programs: the transformers baseline runs one call at a time; on the GPU
        profile's counts it would take hours, so it runs the first programs only (its programs/s
        is a rate, and sequential calls make it independent of the count; the row's "programs"
        in results.json says how many ran).
    """

    name: str
    model: str
    device: str
    engine_options: dict[str, Any] = field(default_factory=dict)
    torch_threads: int | None = None
    transformers_max_programs: int | None = None
    warmup: bool = True


PROFILES = {
    # No warm-up: the smoke run checks that everything completes, not how fast.
    "smoke": Profile(
        "smoke", "tiny", "cpu", {"max_total_tokens": 16384, "max_running_requests": 32}, 1, warmup=False
    ),
    # 64k KV slots hold every CPU workload's working set (so lpm can reach the optimum, which
    # assumes an unbounded cache); --kv-tokens shrinks it to study eviction.
    "cpu": Profile(
        "cpu",
        "tiny-wide",
        "cpu",
        {"max_total_tokens": 65536, "max_running_requests": 64},
        1,
        transformers_max_programs=8,
    ),
    "gpu": Profile("gpu", "llama3-8b", "cuda", {"dtype": "bfloat16", "load_format": "dummy"}, None, 32),
}


class CellRunner:
    """Runs cells (one workload on one system) and turns each into a `Row`."""

    def __init__(self, profile: Profile, model_dir: str, seed: int, repeats: int, warmups: list[Any]) -> None:
        self.profile = profile
        self.model_dir = model_dir
        self.seed = seed
        self.repeats = repeats
        # Small versions of the workloads, run untimed on every new engine and backend first.
        self.warmups = warmups
        self.num_done = 0
        self.num_cells = 0
        self.started = time.perf_counter()

    def _progress(self, row: Row) -> None:
        self.num_done += 1
        hit = "" if row.hit_rate is None else f", hit {row.hit_rate:.1%} (optimal {row.optimal:.1%})"
        failed = f", {len(row.errors)} FAILED: {row.errors[0][:200]}" if row.errors else ""
        print(
            f"[{self.num_done}/{self.num_cells} {time.perf_counter() - self.started:6.0f}s] "
            f"{row.workload} on {row.system}: {row.seconds:.2f} s, {row.programs_per_s:.2f} programs/s{hit}{failed}",
            flush=True,
        )

    def run_engine_group(self, systems: list[System], workloads: list[Any]) -> list[Row]:
        """Systems that share engine options run on one engine, one after the other."""
        from benchlib.backends import HintlessEngineBackend
        from benchlib.recording import RecordingEngine
        from sglr.engine.engine import Engine
        from sglr.lang.backend.engine_backend import EngineBackend

        options = {**self.profile.engine_options, **systems[0].engine_options}
        engine = Engine(model_path=self.model_dir, device=self.profile.device, seed=self.seed, **options)
        rows = []
        try:
            recorder = RecordingEngine(engine)
            for system in systems:
                backend_class = EngineBackend if system.hint else HintlessEngineBackend
                backend = backend_class(recorder)
                # Warm-up: first-call allocations, kernel and grammar compiles stay out of the timings.
                for warmup in self.warmups:
                    if system.applies_to(warmup):
                        self._engine_cell(engine, recorder, backend, system, warmup)
                for workload in workloads:
                    if system.applies_to(workload):
                        runs = [
                            self._engine_cell(engine, recorder, backend, system, workload)
                            for _ in range(self.repeats)
                        ]
                        rows.append(min(runs, key=lambda row: row.seconds))
                        self._progress(rows[-1])
        finally:
            engine.shutdown()
        return rows

    def _engine_cell(self, engine: Any, recorder: Any, backend: Any, system: System, workload: Any) -> Row:
        from benchlib.http_serving import send_all, serve_engine
        from benchlib.program_runs import run_programs

        if not engine.flush_cache():
            raise RuntimeError("the engine is still busy after the previous cell")
        recorder.take_requests()
        if isinstance(workload, ServingWorkload):
            with serve_engine(engine) as url:
                send_all(url, workload.requests[:2], self.seed)  # warm the HTTP path
                engine.flush_cache()
                before = engine.get_stats()
                outcomes, seconds = send_all(url, workload.requests, self.seed)
                after = engine.get_stats()
            latencies = [o.latency for o in outcomes if o.ok]
            errors = [o.error or "no output" for o in outcomes if not o.ok]
            # Random prompts never continue through another request's output, so the outputs
            # (not streamed back as ids) do not change the optimal hit rate.
            requests = [(r.prompt_ids, []) for r in workload.requests]
            num_output = after["num_generated_tokens"] - before["num_generated_tokens"]
        else:
            before = engine.get_stats()
            outcome = run_programs(workload, backend, parallel=system.parallel, hint=system.hint)
            after = engine.get_stats()
            seconds, latencies, errors = outcome.seconds, outcome.latencies, outcome.errors
            requests = recorder.take_requests()
            num_output = sum(len(output) for _, output in requests)
        prompt = after["num_prompt_tokens"] - before["num_prompt_tokens"]
        cached = after["num_cached_prompt_tokens"] - before["num_cached_prompt_tokens"]
        return Row(
            workload.name,
            system.name,
            workload.num_programs,
            seconds,
            latencies,
            hit_rate=cached / prompt if prompt else 0.0,
            optimal=optimal_hit_rate(requests),
            num_requests=len(requests),
            num_prompt_tokens=sum(len(p) for p, _ in requests),
            num_output_tokens=num_output,
            errors=errors,
            engine=engine_deltas(before, after),
        )

    def run_transformers(self, system: System, workloads: list[Any]) -> list[Row]:
        from benchlib.backends import TransformersBackend
        from benchlib.bench_models import TINY_MODELS, load_transformers
        from benchlib.program_runs import run_programs

        dummy_preset = None if self.profile.model in TINY_MODELS else self.profile.model
        model, tokenizer = load_transformers(self.model_dir, self.profile.device, dummy_preset)
        backend = TransformersBackend(model, tokenizer, self.model_dir)
        rows = []
        limit = self.profile.transformers_max_programs
        for warmup in self.warmups:
            if system.applies_to(warmup):
                run_programs(warmup, backend, parallel=system.parallel, hint=False)
        for workload in workloads:
            if not system.applies_to(workload):
                continue
            subset = replace(workload, arguments=workload.arguments[:limit] if limit else workload.arguments)
            outcome = min(
                (
                    run_programs(subset, backend, parallel=system.parallel, hint=False)
                    for _ in range(self.repeats)
                ),
                key=lambda outcome: outcome.seconds,
            )
            rows.append(
                Row(
                    workload.name,
                    system.name,
                    subset.num_programs,
                    outcome.seconds,
                    outcome.latencies,
                    hit_rate=None,
                    optimal=None,
                    errors=outcome.errors,
                )
            )
            self._progress(rows[-1])
        return rows


def resolve_model_dir(profile: Profile) -> str:
    from benchlib.bench_models import TINY_MODELS, dummy_model_dir, tiny_model_dir

    return tiny_model_dir(profile.model) if profile.model in TINY_MODELS else dummy_model_dir(profile.model)


def run(
    profile_name: str,
    workload_names: list[str],
    system_names: list[str],
    seed: int = 0,
    output_dir: str | None = None,
    command: str | None = None,
    kv_tokens: int | None = None,
    model: str | None = None,
    repeats: int = 1,
    multimodal: bool = False,
) -> list[Row]:
    """Runs the workloads on the systems; prints and writes the table and chart; returns the rows.

    kv_tokens / model: instead of the profile's. repeats: runs per cell; the fastest counts (on a
    shared machine, other processes only ever add time). multimodal: also the image and video QA
    workloads (`image_qa_cpu.py`: a tiny LLaVA, cache on vs off; CPU profiles only), as their
    own section of the table.
    """
    unknown = [n for n in workload_names if n not in BUILDERS] + [n for n in system_names if n not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown workload(s) or system(s): {', '.join(unknown)}")
    profile = PROFILES[profile_name]
    if model is not None:
        profile = replace(profile, model=model)
    if kv_tokens is not None:
        options = {k: v for k, v in profile.engine_options.items() if k != "mem_fraction_static"}
        profile = replace(profile, engine_options={**options, "max_total_tokens": kv_tokens})
    import torch

    if profile.torch_threads:
        torch.set_num_threads(profile.torch_threads)
    if profile.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("the gpu profile needs a CUDA device; use --profile cpu here")
    model_dir = resolve_model_dir(profile)
    vocab_size = json.loads(Path(model_dir, "config.json").read_text())["vocab_size"]
    workloads = [BUILDERS[name](profile.name, seed, vocab_size) for name in workload_names]
    warmups = (
        [BUILDERS[name]("smoke", seed + 1, vocab_size) for name in workload_names] if profile.warmup else []
    )
    systems = [SYSTEMS[name] for name in system_names]
    runner = CellRunner(profile, model_dir, seed, repeats, warmups)
    runner.num_cells = sum(system.applies_to(w) for system in systems for w in workloads)
    print(
        f"profile {profile.name}: model {model_dir} on {profile.device}; {runner.num_cells} cells", flush=True
    )
    rows: list[Row] = []
    engine_groups: dict[tuple, list[System]] = {}
    for system in systems:
        if not system.is_transformers:
            engine_groups.setdefault(system.engine_key, []).append(system)
    for group in engine_groups.values():
        rows += runner.run_engine_group(group, workloads)
    for system in systems:
        if system.is_transformers:
            rows += runner.run_transformers(system, workloads)
    workload_order = {workload.name: index for index, workload in enumerate(workloads)}
    rows.sort(key=lambda r: (workload_order[r.workload], system_names.index(r.system)))
    extra = multimodal_section(profile.name) if multimodal else ""
    report(
        rows, profile, system_names, output_dir or str(BENCHES_DIR / "results" / profile.name), command, extra
    )
    return rows


def machine_description(device: str) -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    text = f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads)"
    if device == "cuda":
        text += f", GPU {torch.cuda.get_device_name()}"
    return text


def report(
    rows: list[Row],
    profile: Profile,
    system_names: list[str],
    output_dir: str,
    command: str | None,
    extra: str = "",
) -> None:
    """extra: a further markdown section (the multimodal workloads) after the tables."""
    table = markdown_table(rows, BASELINE)
    shapes = shapes_table(rows, "sglr")
    legend = "\n".join(f"- `{name}`: {SYSTEMS[name].description}" for name in system_names)
    header = (
        f"Profile `{profile.name}`, model `{profile.model}` on {profile.device}; machine: "
        f"{machine_description(profile.device)}; {time.strftime('%Y-%m-%d')}.\n"
        + (f"Command: `{command}`\n" if command else "")
    )
    work = work_table(rows)
    text = (
        f"{header}\n{table}\n\nSystems:\n{legend}\n\nWorkload shapes (on `sglr`):\n\n{shapes}\n\n"
        f"Engine work per program:\n\n{work}\n"
    )
    if extra:
        text += "\n" + extra
    print()
    print(text)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    results = [
        {**asdict(row), "programs_per_s": row.programs_per_s, "mean_latency": row.mean_latency}
        for row in rows
    ]
    (out / "results.json").write_text(json.dumps({"profile": profile.name, "rows": results}, indent=1))
    present = [name for name in system_names if any(row.system == name for row in rows)]
    write_chart(rows, present, str(out / "chart.png"), f"sglr workloads, {profile.name} profile")
    print(f"wrote {out / 'table.md'}, {out / 'results.json'}, {out / 'chart.png'}")


#: image_qa_cpu.py's flags per profile (the smoke sizes finish in seconds).
MULTIMODAL_ARGS = {
    "smoke": ["--questions", "3", "--image-size", "56", "--video-frames", "2", "--max-new-tokens", "2"],
    "cpu": [],
}


def multimodal_section(profile_name: str) -> str:
    if profile_name not in MULTIMODAL_ARGS:
        return "Multimodal workloads: not run (`image_qa_cpu.py` runs on the CPU profiles only).\n"
    import image_qa_cpu

    argv = MULTIMODAL_ARGS[profile_name]
    print("running: multimodal workloads (image_qa_cpu.py)", flush=True)
    table = image_qa_cpu.measure(image_qa_cpu.parse_args(argv), shlex.join(["image_qa_cpu.py", *argv]))
    return "## Multimodal workloads\n\n" + table.split("\n", 2)[2] + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="cpu")
    parser.add_argument("--workloads", default=",".join(BUILDERS), help="comma-separated subset")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", default=None, help="default: benches/results/<profile>")
    parser.add_argument(
        "--kv-tokens", type=int, default=None, help="KV-cache size in tokens (default: the profile's)"
    )
    parser.add_argument(
        "--model", default=None, help="tiny, tiny-wide or a model_gpu.py preset (default: the profile's)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs per cell; the fastest is reported")
    parser.add_argument(
        "--multimodal",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the image / video QA workloads too (default: on for the cpu profile)",
    )
    args = parser.parse_args()
    command = "python benches/run_workloads.py " + shlex.join(sys.argv[1:])
    run(
        args.profile,
        args.workloads.split(","),
        args.systems.split(","),
        args.seed,
        args.output_dir,
        command,
        kv_tokens=args.kv_tokens,
        model=args.model,
        repeats=args.repeats,
        multimodal=args.profile == "cpu" if args.multimodal is None else args.multimodal,
    )


if __name__ == "__main__":
    main()
