"""Backends of the ablations and baselines (the full system is the plain `EngineBackend`).

- `HintlessEngineBackend`: the engine without the frontend hints (no prefix prefill before a
  batch or a fork), so forks and batch members race to prefill their shared prefix;
- `TransformersBackend`: Hugging Face `transformers` `generate` on the same weights, one call at a
  time (no batching across programs, no KV reuse across calls), for plain-generation workloads.
"""

from __future__ import annotations

import threading
from typing import Any

from sglr.lang.backend.base import BaseBackend
from sglr.lang.backend.engine_backend import EngineBackend
from sglr.lang.chat_template import choose_chat_template


class HintlessEngineBackend(EngineBackend):
    def cache_prefix(self, prefix_str: str) -> None:
        """No frontend hint: the batch's shared prefix is not prefilled ahead of the programs."""

    def commit_lazy_operations(self, s: Any) -> None:
        """No frontend hint: a fork's shared prefix is not prefilled ahead of its branches."""


class TransformersBackend(BaseBackend):
    """Greedy `model.generate` per call; `stop` strings end a call as they end it on the engine.

    `model` is a loaded `AutoModelForCausalLM` (the caller picks device, dtype and weights).
    """

    def __init__(self, model: Any, tokenizer: Any, model_dir: str) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.chat_template = choose_chat_template(
            model_path=model_dir, tokenizer_template=tokenizer.chat_template
        )
        # NOTE: one call at a time: transformers has no cross-request batching or scheduler.
        self._lock = threading.Lock()
        self.num_prompt_tokens = 0

    def generate(self, s: Any, sampling_params: Any) -> tuple[str, dict[str, Any]]:
        import torch

        params = sampling_params
        if params.regex or params.json_schema or params.dtype or params.n != 1 or params.temperature > 0:
            raise ValueError("the transformers baseline runs greedy, unconstrained, n=1 generation only")
        input_ids = self.tokenizer(s.text_, return_tensors="pt").input_ids.to(self.model.device)
        stop = list(params.stop) or None
        with self._lock, torch.inference_mode():
            output = self.model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=params.max_new_tokens,
                # ignore_eos: keep EOS from ending the output early, as the engine does.
                min_new_tokens=params.max_new_tokens if params.ignore_eos else 0,
                do_sample=False,
                stop_strings=stop,
                tokenizer=self.tokenizer if stop else None,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
            self.num_prompt_tokens += input_ids.shape[1]
        new_ids = output[0, input_ids.shape[1] :].tolist()
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        for stop_str in stop or ():
            position = text.find(stop_str)
            if position >= 0:
                text = text[:position]
        meta = {"prompt_tokens": input_ids.shape[1], "completion_tokens": len(new_ids), "finish_reason": None}
        return text, meta

    def select(self, s: Any, choices: Any, temperature: float, choices_method: Any) -> Any:
        raise NotImplementedError("the transformers baseline runs plain-generation workloads only")

    def get_model_name(self) -> str:
        return "transformers"
