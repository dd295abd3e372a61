"""Generation nodes for `StreamExecutor`: gen (plain, streamed, speculative) and select.

Split out of `stream_executor.py` to keep files small; runs on the executor's worker thread.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from sglr.lang import ir
from sglr.lang.speculative import GenPart, can_speculate, earliest_stop

if TYPE_CHECKING:
    from sglr.lang.gen_params import GenParams


class GenerationMixin:
    # Attributes and helpers provided by StreamExecutor.
    backend: Any
    chat_template: Any
    default_sampling_params: Any
    num_api_spec_tokens: int | None
    speculated_text: str
    stream: bool
    cur_role: str | None

    def _resolve_sampling_params(self, expr: ir.Gen) -> GenParams:
        params = self.default_sampling_params.merged(**expr.overrides)
        return params.with_stop(self.chat_template.stop_str) if self.chat_template.stop_str else params

    def _chat_speculation(self, role: str | None) -> bool:
        return bool(self.num_api_spec_tokens) and role == "assistant" and self.backend.is_chat_model

    def _execute_gen(self, expr: ir.Gen) -> None:
        params = self._resolve_sampling_params(expr)
        if self._chat_speculation(self.cur_role):
            self._spec_parts.append(GenPart(expr.name, params, self._current_node_id))
            return
        if self.stream:
            self._stream_gen(expr.name, params)
            return
        if self.num_api_spec_tokens and not self.backend.is_chat_model and can_speculate(params):
            value, meta = self._speculative_gen(params)
        else:
            self.speculated_text = ""
            value, meta = self.backend.generate(self, params)
        self._append_text(value[0] if isinstance(value, list) else value)
        self._set_var(expr.name, value, meta)

    def _speculative_gen(self, params: GenParams) -> tuple[str, dict]:
        if not self.speculated_text:
            spec_params = dataclasses.replace(
                params,
                max_new_tokens=max(params.max_new_tokens or 0, self.num_api_spec_tokens or 0),
                stop=tuple(self.chat_template.stop_str),
            )
            text, meta = self.backend.generate(self, spec_params)
            self.speculated_text, self._spec_meta = text, meta
        cut = earliest_stop(self.speculated_text, params.stop)
        if cut is None:
            value, self.speculated_text = self.speculated_text, ""
            finish = self._spec_meta.get("finish_reason") if isinstance(self._spec_meta, dict) else None
            if isinstance(finish, dict) and finish.get("type") == "length":
                # The speculative call ran out of tokens inside this gen: generate it properly.
                return self.backend.generate(self, params)
            return value, {"speculative": True}
        value, self.speculated_text = self.speculated_text[:cut], self.speculated_text[cut:]
        return value, {"speculative": True}

    def _stream_gen(self, name: str | None, params: GenParams) -> None:
        if params.n > 1:
            raise ValueError("n > 1 is not supported with stream=True")
        self.speculated_text = ""
        value, meta = "", {}
        with self._cond:
            if name is not None:
                self.variables[name] = ""
                self._streaming_vars.add(name)
        for delta, meta in self.backend.generate_stream(self, params):
            with self._cond:
                value += delta
                self.text_ += delta
                if name is not None:
                    self.variables[name] = value
                    self.meta_info[name] = meta
                self._cond.notify_all()
        self._set_var(name, value, meta)

    def _execute_select(self, expr: ir.Select) -> None:
        if self._chat_speculation(self.cur_role) and self._spec_parts:
            # The chat API would need the turn's text so far, which speculation has not generated.
            raise ValueError(
                "with num_api_spec_tokens on a chat model, select must come first in its assistant turn"
            )
        decision = self.backend.select(self, expr.choices, expr.temperature, expr.choices_method)
        self._fill(decision.decision)
        self._set_var(expr.name, decision.decision, decision.meta_info)
