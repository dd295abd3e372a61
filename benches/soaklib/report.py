"""The soak's verdict: every answer judged against the fault windows, resident memory over the
second half, the servers' KV accounting, orphans; one table and the list of what failed."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from .faults import FaultWindow
from .traffic import Outcome

MAX_RSS_GROWTH = 0.05


@dataclass
class RssSample:
    at: float
    by_role: dict[str, int]


@dataclass
class SoakReport:
    duration_s: float
    outcomes: list[Outcome]
    windows: list[FaultWindow]
    rss: list[RssSample]
    restarted_at: dict[str, float]  # role -> last (re)start, monotonic
    invariants: dict[str, str]  # server -> "ok" or what failed
    orphans: list[str]
    started: float
    problems: list[str] = field(default_factory=list)

    def judge(self) -> dict:
        kills = [w for w in self.windows if w.name.startswith("SIGKILL")]
        lost, on_killed, accepted_bad = [], [], []
        for out in self.outcomes:
            if out.bad:
                if out.verdict == "ok":
                    accepted_bad.append(out)
                elif out.verdict != "refused":
                    lost.append(out)
                continue
            if out.verdict in ("ok", "left"):
                continue
            # A typed failure of a request that was running when a worker was killed is expected.
            if out.verdict == "failed" and any(out.started <= w.started <= out.ended for w in kills):
                on_killed.append(out)
                continue
            lost.append(out)
        for out in lost[:20]:
            during = [w.name for w in self.windows if w.overlaps(out.started, out.ended)]
            when = f"{out.started - self.started:.1f}-{out.ended - self.started:.1f} s"
            self.problems.append(
                f"lost: {out.kind} ({out.behaviour}, bad={out.bad}) at {when}"
                f"{' during ' + '; '.join(during) if during else ''}: {out.detail}"
            )
        for out in accepted_bad[:20]:
            self.problems.append(f"bad input accepted: {out.kind} -> {out.status}")
        growth, roles = self._rss_growth()
        if growth is not None and growth > MAX_RSS_GROWTH:
            self.problems.append(
                f"resident memory grew {growth:.1%} over the second half ({', '.join(roles)})"
            )
        for server, verdict in self.invariants.items():
            if verdict != "ok":
                self.problems.append(f"{server}: {verdict}")
        self.problems += [f"orphan process: {orphan}" for orphan in self.orphans]
        good = [o for o in self.outcomes if not o.bad]
        verdicts = Counter(o.verdict for o in good)
        return {
            "duration_s": round(self.duration_s, 1),
            "num_requests": len(self.outcomes),
            "num_ok": verdicts["ok"],
            "num_left": verdicts["left"],
            "num_bad_inputs": sum(o.bad for o in self.outcomes),
            "num_bad_refused": sum(o.bad and o.verdict == "refused" for o in self.outcomes),
            "num_failed_on_killed_worker": len(on_killed),
            "num_lost": len(lost),
            "num_bad_accepted": len(accepted_bad),
            "num_faults": len(self.windows),
            "num_client_faults": sum(o.behaviour != "normal" for o in self.outcomes),
            "faults": [w.name for w in self.windows],
            "p99_s_without_faults": self._p99(faulty=False),
            "p99_s_with_faults": self._p99(faulty=True),
            "rss_growth_second_half": None if growth is None else round(growth, 4),
            "rss_roles": roles,
            "invariants": self.invariants,
            "orphans": self.orphans,
            "problems": self.problems,
        }

    def _p99(self, faulty: bool) -> float | None:
        latencies = [
            o.ended - o.started
            for o in self.outcomes
            if not o.bad and o.verdict == "ok" and o.behaviour == "normal"
            and any(w.overlaps(o.started, o.ended) for w in self.windows) == faulty
        ]  # fmt: skip
        if len(latencies) < 2:
            return None
        return round(statistics.quantiles(latencies, n=100)[98], 3)

    def _rss_growth(self) -> tuple[float | None, list[str]]:
        """Growth of the summed RSS of the roles that ran through the whole second half, from the
        samples around its start to those at its end (medians of three, against jitter)."""
        middle = self.started + self.duration_s / 2
        roles = (
            sorted(r for r in self.rss[-1].by_role if self.restarted_at.get(r, 0) < middle)
            if self.rss
            else []
        )
        second = [s for s in self.rss if s.at >= middle]
        if len(second) < 6 or not roles:
            return None, roles

        def total(sample: RssSample) -> int:
            return sum(sample.by_role.get(r, 0) for r in roles)

        first = statistics.median(total(s) for s in second[:3])
        last = statistics.median(total(s) for s in second[-3:])
        return last / first - 1, roles


def table(summary: dict) -> str:
    def fmt(value):
        return "-" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))

    rows = [
        ("requests", summary["num_requests"]),
        ("  well-formed: ok / client left", f"{summary['num_ok']} / {summary['num_left']}"),
        (
            "  bad inputs tried / refused with a 4xx",
            f"{summary['num_bad_inputs']} / {summary['num_bad_refused']}",
        ),
        ("  failed because their worker was killed", summary["num_failed_on_killed_worker"]),
        ("  lost", summary["num_lost"]),
        ("  bad inputs accepted", summary["num_bad_accepted"]),
        ("process faults injected", summary["num_faults"]),
        ("client faults (leave, slow reader, abort)", summary["num_client_faults"]),
        ("p99 latency s, no fault running", fmt(summary["p99_s_without_faults"])),
        ("p99 latency s, during a fault", fmt(summary["p99_s_with_faults"])),
        ("RSS growth over the second half", fmt(summary["rss_growth_second_half"])),
        ("KV invariants", ", ".join(f"{k}: {v}" for k, v in summary["invariants"].items())),
        ("orphan processes", len(summary["orphans"])),
    ]
    lines = ["| measure | value |", "| --- | ---: |"]
    lines += [f"| {name} | {fmt(value)} |" for name, value in rows]
    return "\n".join(lines)
