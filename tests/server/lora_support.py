"""LoRA adapters for the server tests: random PEFT adapters of the tiny model (written by `peft`,
`sglr.testing.tiny_lora`), some inside a directory a server allows runtime loads from and some
outside it, and the oracle's greedy tokens for them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sglr.testing.tiny_lora import peft_greedy, write_peft_adapter

GREEDY = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}
PROMPTS = [list(range(40, 72)), list(range(300, 316)), list(range(1000, 1040, 2))]


@dataclass(frozen=True)
class LoraSet:
    base: Path
    # Loaded at start (`lora_paths`): the operator's, outside the allowed root.
    sql: Path
    chat: Path
    # The directory runtime loads may read from, and what is in it.
    root: Path
    late: Path
    late_v2: Path  # other weights for the same name
    broken: Path  # a directory that is no adapter
    escape: Path  # a symlink in the root to an adapter outside it
    hidden_link: Path  # an adapter in the root whose weights file links outside it

    def startup_paths(self) -> list[str]:
        return [f"sql={self.sql}", f"chat={self.chat}"]

    def expected(
        self, adapter: Path | None, prompt: list[int], num_tokens: int = GREEDY["max_new_tokens"]
    ) -> list[int]:
        return peft_greedy(self.base, adapter, prompt, num_tokens)


def write_lora_set(base: Path, out: Path) -> LoraSet:
    outside = out / "operator"
    root = out / "allowed"
    root.mkdir()
    sql = write_peft_adapter(base, outside / "sql", rank=8, target_modules=("q_proj", "v_proj"), seed=11)
    chat = write_peft_adapter(base, outside / "chat", rank=4, target_modules=("o_proj", "up_proj"), seed=12)
    late = write_peft_adapter(
        base, root / "late", rank=6, target_modules=("q_proj", "k_proj", "v_proj", "o_proj"), seed=13
    )
    late_v2 = write_peft_adapter(
        base, root / "late_v2", rank=4, target_modules=("gate_proj", "down_proj"), seed=14
    )
    broken = root / "broken"
    broken.mkdir()
    (broken / "README.md").write_text("not an adapter\n")
    escape = root / "escape"
    os.symlink(sql, escape)
    hidden_link = root / "hidden_link"
    hidden_link.mkdir()
    (hidden_link / "adapter_config.json").write_bytes((sql / "adapter_config.json").read_bytes())
    os.symlink(sql / "adapter_model.safetensors", hidden_link / "adapter_model.safetensors")
    return LoraSet(base, sql, chat, root, late, late_v2, broken, escape, hidden_link)
