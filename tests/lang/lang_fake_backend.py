"""A scripted backend that records every call, for testing the interpreter's mechanics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglr.lang.backend.base import BaseBackend
from sglr.lang.chat_template import get_chat_template
from sglr.lang.choices import ChoicesDecision, decide


@dataclass
class Call:
    kind: str
    text: str
    thread: str
    start: float
    end: float = 0.0
    params: Any = None
    extra: dict = field(default_factory=dict)


def default_reply(prompt: str, params: Any) -> str:
    return f"<{len(prompt)}>"


class RecordingBackend(BaseBackend):
    """`reply(prompt, params) -> str` scripts generation; `fail_when(prompt)` makes a call raise;
    `choice_logprobs(prompt, choice) -> list[float]` scripts select; `delay` seconds per call."""

    def __init__(
        self,
        reply: Callable[[str, Any], str] = default_reply,
        *,
        delay: float = 0.0,
        fail_when: Callable[[str], bool] | None = None,
        choice_logprobs: Callable[[str, str], list[float]] | None = None,
        chat_template: str = "default",
        chunk_chars: int = 2,
    ) -> None:
        super().__init__()
        self.reply = reply
        self.delay = delay
        self.fail_when = fail_when
        self.choice_logprobs = choice_logprobs or (lambda prompt, choice: [-float(len(choice))])
        self.chat_template = get_chat_template(chat_template)
        self.chunk_chars = chunk_chars
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def _record(self, kind: str, text: str, **extra: Any) -> Call:
        call = Call(kind, text, threading.current_thread().name, time.monotonic(), extra=extra)
        with self._lock:
            self.calls.append(call)
        return call

    def kinds(self) -> list[str]:
        return [call.kind for call in self.calls]

    def of_kind(self, kind: str) -> list[Call]:
        return [call for call in self.calls if call.kind == kind]

    def _work(self, prompt: str) -> None:
        if self.delay:
            time.sleep(self.delay)
        if self.fail_when is not None and self.fail_when(prompt):
            raise RuntimeError(f"scripted failure for a prompt of {len(prompt)} chars")

    def generate(self, s: Any, sampling_params: Any) -> tuple[str | list[str], dict]:
        call = self._record("generate", s.text_)
        call.params = sampling_params
        self._work(s.text_)
        call.end = time.monotonic()
        if sampling_params.n > 1:
            return [self.reply(s.text_, sampling_params) + str(i) for i in range(sampling_params.n)], {}
        return self.reply(s.text_, sampling_params), {"finish_reason": {"type": "stop"}}

    def generate_stream(self, s: Any, sampling_params: Any) -> Iterator[tuple[str, dict]]:
        call = self._record("generate_stream", s.text_)
        call.params = sampling_params
        self._work(s.text_)
        text = self.reply(s.text_, sampling_params)
        for start in range(0, len(text), self.chunk_chars):
            yield text[start : start + self.chunk_chars], {"completion_tokens": start + 1}
            time.sleep(0.001)
        call.end = time.monotonic()

    def select(
        self, s: Any, choices: Sequence[str], temperature: float, choices_method: Any
    ) -> ChoicesDecision:
        self._record("select", s.text_, choices=list(choices))
        self._work(s.text_)
        entries = [
            [[None, 0, None]] + [[lp, 0, None] for lp in self.choice_logprobs(s.text_, c)] for c in choices
        ]
        unconditional = [[[None, 0, None]] + [[0.0, 0, None]] * (len(e) - 1) for e in entries]
        return decide(list(choices), entries, choices_method, None, unconditional)

    def cache_prefix(self, prefix_str: str) -> None:
        self._record("cache_prefix", prefix_str)

    def commit_lazy_operations(self, s: Any) -> None:
        self._record("commit_lazy", s.text_)

    def begin_program(self, s: Any) -> None:
        self._record("begin_program", "", sid=s.sid)

    def end_program(self, s: Any) -> None:
        self._record("end_program", "", sid=s.sid)

    def flush_cache(self) -> bool:
        self._record("flush_cache", "")
        return True

    def get_server_info(self) -> dict:
        return {"version": "fake"}
