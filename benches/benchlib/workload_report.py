"""The runner's results: one row per (workload, system), a markdown table and a bar chart."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Row:
    """One workload on one system.

    hit_rate: cached / total prompt tokens, from the engine's counters (None: no prefix cache to
        ask, e.g. transformers). optimal: the same ratio for the best order and an unbounded
        cache, from the trie of the requests this run sent (None when they were not recorded).
    """

    workload: str
    system: str
    num_programs: int
    seconds: float
    latencies: list[float]
    hit_rate: float | None
    optimal: float | None
    num_requests: int = 0
    num_prompt_tokens: int = 0
    num_output_tokens: int = 0
    errors: list[str] = field(default_factory=list)
    # Engine counter deltas over the cell (ENGINE_COUNTERS); empty for transformers.
    engine: dict[str, float] = field(default_factory=dict)

    @property
    def programs_per_s(self) -> float:
        return (self.num_programs - len(self.errors)) / self.seconds if self.seconds > 0 else 0.0

    @property
    def mean_latency(self) -> float:
        return statistics.fmean(self.latencies) if self.latencies else float("nan")

    @property
    def share_of_optimal(self) -> float | None:
        if self.hit_rate is None or not self.optimal:
            return None
        return self.hit_rate / self.optimal


#: Engine counters a row keeps (differences over its cell), to show where the time went.
ENGINE_COUNTERS = (
    "busy_seconds",
    "num_extend_passes",
    "num_extend_tokens",
    "num_decode_passes",
    "num_decode_seqs",
    "num_retractions",
)


def engine_deltas(before: dict, after: dict) -> dict[str, float]:
    return {key: after[key] - before[key] for key in ENGINE_COUNTERS}


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def speedup(rows: list[Row], row: Row, baseline: str) -> float | None:
    base = next((r for r in rows if r.workload == row.workload and r.system == baseline), None)
    if base is None or base.programs_per_s == 0:
        return None
    return row.programs_per_s / base.programs_per_s


def markdown_table(rows: list[Row], baseline: str) -> str:
    lines = [
        f"| workload | system | programs/s | mean latency (s) | hit rate | optimal | % of optimal | vs {baseline} |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = speedup(rows, row, baseline)
        failed = f" ({len(row.errors)} failed)" if row.errors else ""
        lines.append(
            f"| {row.workload} | {row.system}{failed} | {row.programs_per_s:.2f} | {row.mean_latency:.2f} | "
            f"{_percent(row.hit_rate)} | {_percent(row.optimal)} | {_percent(row.share_of_optimal)} | "
            f"{'n/a' if ratio is None else f'{ratio:.2f}x'} |"
        )
    return "\n".join(lines)


def shapes_table(rows: list[Row], system: str) -> str:
    """What each workload sent on `system`: requests per program, prompt and output tokens per request."""
    lines = [
        "| workload | programs | requests/program | prompt tokens/request | output tokens/request |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row.system != system or not row.num_requests:
            continue
        lines.append(
            f"| {row.workload} | {row.num_programs} | {row.num_requests / row.num_programs:.1f} | "
            f"{row.num_prompt_tokens / row.num_requests:.0f} | {row.num_output_tokens / row.num_requests:.1f} |"
        )
    return "\n".join(lines)


def work_table(rows: list[Row]) -> str:
    """Where the engine's time went, per program: tokens prefilled (computed, not cached), decode
    steps and their mean batch size, and the engine's busy time against the wall time."""
    lines = [
        "| workload | system | prefill tokens/program | decode steps/program | mean decode batch | engine busy share |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        if not row.engine:
            continue
        counters, n = row.engine, row.num_programs
        batch = counters["num_decode_seqs"] / max(counters["num_decode_passes"], 1)
        lines.append(
            f"| {row.workload} | {row.system} | {counters['num_extend_tokens'] / n:.0f} | "
            f"{counters['num_decode_passes'] / n:.1f} | {batch:.1f} | {counters['busy_seconds'] / row.seconds:.0%} |"
        )
    return "\n".join(lines)


def write_chart(rows: list[Row], systems: list[str], path: str, title: str) -> None:
    """Grouped bars: programs/s of each system normalized to the best system of each workload."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(row.workload for row in rows))
    by_key = {(row.workload, row.system): row for row in rows}
    width = 0.8 / max(len(systems), 1)
    figure, axes = plt.subplots(figsize=(max(8.0, 1.1 * len(workloads) + 2), 5.5))
    for index, system in enumerate(systems):
        heights, positions = [], []
        for position, workload in enumerate(workloads):
            row = by_key.get((workload, system))
            if row is None:
                continue
            best = max(r.programs_per_s for r in rows if r.workload == workload)
            heights.append(row.programs_per_s / best if best > 0 else 0.0)
            positions.append(position + (index - (len(systems) - 1) / 2) * width)
        axes.bar(positions, heights, width, label=system)
    axes.set_xticks(range(len(workloads)), workloads, rotation=30, ha="right")
    axes.set_ylabel("normalized throughput")
    axes.set_ylim(0, 1.05)
    axes.set_title(title)
    # Below the plot: inside, it would cover the bars of the last workloads.
    axes.legend(fontsize="small", ncol=len(systems), loc="upper center", bbox_to_anchor=(0.5, -0.32))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
