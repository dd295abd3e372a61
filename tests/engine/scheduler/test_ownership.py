"""Who may change what, read from the source: the request table alone writes a request's phase,
and both schedulers the front can hold implement the one declared interface."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from sglr.engine.scheduler.handle import SchedulerHandle
from sglr.engine.scheduler.loop import SchedulerLoop
from sglr.engine.worker.client import WorkerScheduler

PACKAGE = Path(__file__).resolve().parents[3] / "python" / "sglr"


def _assignments_to(attribute: str) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == attribute:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_only_the_request_table_writes_a_requests_phase() -> None:
    writers = {place.split(":")[0] for place in _assignments_to("phase")}
    assert writers == {"engine/scheduler/table.py"}


@pytest.mark.parametrize("scheduler", [SchedulerLoop, WorkerScheduler])
def test_both_schedulers_implement_the_handle(scheduler: type) -> None:
    assert issubclass(scheduler, SchedulerHandle)
    assert not getattr(scheduler, "__abstractmethods__", None)
    for name, member in inspect.getmembers(SchedulerHandle):
        if callable(member) and getattr(member, "__isabstractmethod__", False):
            declared = inspect.signature(member)
            implemented = inspect.signature(getattr(scheduler, name))
            assert list(implemented.parameters) == list(declared.parameters), name
