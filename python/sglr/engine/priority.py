"""`PriorityPolicy`: SGLang's priority scheduling, as one value both sides of the engine read.

With `enable_priority_scheduling`, each request's `priority` (an int, default 0) orders the
waiting queue before the schedule policy does (the policy's cache-aware order stands within one
priority), and a waiting request whose priority beats a running one's by more than
`priority_scheduling_preemption_threshold` retracts it when it cannot be admitted. Larger values
go first unless `schedule_low_priority_values_first` (SGLang's default and switch). Off, a
request's priority is accepted and ignored, or refused with `abort_on_priority_when_disabled`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglr.errors import InvalidRequestError

# SGLang's default `--priority-scheduling-preemption-threshold`.
DEFAULT_PREEMPTION_THRESHOLD = 10
# Priorities are 32-bit (the scheduler's keys are their negations, in 64 bits).
_PRIORITY_BOUND = 2**31


@dataclass(frozen=True)
class PriorityPolicy:
    enabled: bool = False
    low_values_first: bool = False
    preemption_threshold: int = DEFAULT_PREEMPTION_THRESHOLD
    abort_when_disabled: bool = False

    def resolve(self, priority: int | None) -> int:
        """The request's priority as the scheduler uses it (0 while priority scheduling is
        off); a bad value, or any value with `abort_when_disabled`, is refused naming the field."""
        if priority is None:
            return 0
        if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) >= _PRIORITY_BOUND:
            raise InvalidRequestError(
                f"priority must be an integer in (-2**31, 2**31), got {priority!r}", param="priority"
            )
        if not self.enabled:
            if self.abort_when_disabled:
                raise InvalidRequestError(
                    "priority was given but priority scheduling is not enabled (--enable-priority-scheduling)",
                    param="priority",
                )
            return 0
        return priority

    def queue_key(self, priority: int) -> int:
        """The Rust scheduler's key: smaller keys are offered first (all equal while off)."""
        if not self.enabled:
            return 0
        return priority if self.low_values_first else -priority

    def preempts(self, waiting: int, running: int) -> bool:
        """Whether a waiting request of priority `waiting` may retract a running one."""
        return self.enabled and self.queue_key(running) - self.queue_key(waiting) > self.preemption_threshold
