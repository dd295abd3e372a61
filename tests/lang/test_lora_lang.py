"""LoRA adapters in LM programs on the in-process engine: `gen(lora_path=...)` generates with
that adapter, `run(lora_path=...)` / `run_batch(..., lora_path=...)` with it for every `gen`
(a `gen`'s own wins), and a `select` of such a run scores with the adapter (`transformers` +
`peft`'s logprobs)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from lang_engine import make_tiny_engine

import sglr as sgl
from sglr.lang.gen_params import GenParams
from sglr.testing.tiny_lora import peft_greedy, write_peft_adapter

GREEDY = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}
PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def adapters(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("lang-lora")
    return {
        "sql": write_peft_adapter(
            tiny_llama_dir, out / "sql", rank=8, target_modules=("q_proj", "v_proj"), seed=21
        ),
        "chat": write_peft_adapter(
            tiny_llama_dir, out / "chat", rank=4, target_modules=("o_proj", "up_proj"), seed=22
        ),
    }


@pytest.fixture(scope="module")
def engine(tiny_llama_dir: Path, adapters: dict[str, Path]) -> Iterator:
    engine = make_tiny_engine(
        tiny_llama_dir, lora_paths=[f"{name}={path}" for name, path in adapters.items()]
    )
    yield engine
    engine.shutdown()


def expected_text(engine, lora_path: str | None, prompt: str = PROMPT) -> str:
    return engine.generate(prompt, GREEDY, lora_path=lora_path)["text"]


@sgl.function
def complete(s, adapter=None):
    s += PROMPT + sgl.gen("out", max_tokens=8, temperature=0, ignore_eos=True, lora_path=adapter)


def test_gen_lora_path_generates_with_the_adapter(engine, adapters, tiny_llama_dir: Path) -> None:
    ids = engine.tokenizer.encode(PROMPT)
    assert engine.generate(input_ids=ids, sampling_params=GREEDY, lora_path="sql")[
        "output_ids"
    ] == peft_greedy(tiny_llama_dir, adapters["sql"], ids, GREEDY["max_new_tokens"])
    texts = {name: complete.run(adapter=name, backend=engine)["out"] for name in ("sql", "chat", None)}
    assert texts == {name: expected_text(engine, name) for name in ("sql", "chat", None)}
    assert len(set(texts.values())) == 3


def test_run_level_lora_path_sets_every_gen_unless_it_names_its_own(engine) -> None:
    assert complete.run(lora_path="chat", backend=engine)["out"] == expected_text(engine, "chat")
    assert complete.run(adapter="sql", lora_path="chat", backend=engine)["out"] == expected_text(
        engine, "sql"
    )
    states = complete.run_batch([{}, {"adapter": "sql"}], lora_path="chat", backend=engine)
    assert [state["out"] for state in states] == [expected_text(engine, "chat"), expected_text(engine, "sql")]


def test_an_unknown_adapter_is_raised_where_the_result_is_read(engine) -> None:
    state = complete.run(adapter="nope", backend=engine)
    with pytest.raises(
        sgl.ProgramError if hasattr(sgl, "ProgramError") else Exception, match="'nope' is not loaded"
    ):
        state["out"]
    with pytest.raises(ValueError, match="lora_path must be an adapter's name"):
        GenParams(lora_path="")


def test_select_of_an_adapter_run_scores_with_the_adapter(engine, adapters, tiny_llama_dir: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    prompt, choices = "Answer: ", ["yes", "no", "maybe"]

    @sgl.function
    def pick(s):
        s += prompt + sgl.select("choice", choices=choices)

    base = AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, str(adapters["chat"])).eval()
    prompt_ids = engine.tokenizer.encode(prompt)
    means = []
    for choice in choices:
        ids = engine.tokenizer.encode(prompt + choice)
        start = next(i for i, (a, b) in enumerate(zip([*prompt_ids, -1], ids, strict=False)) if a != b)
        with torch.no_grad():
            logprobs = model(torch.tensor([ids])).logits[0].log_softmax(-1)
        row = [logprobs[i - 1, ids[i]].item() for i in range(start, len(ids))]
        means.append(sum(row) / len(row))
    state = pick.run(lora_path="chat", backend=engine)
    normalized = state.get_meta_info("choice")["normalized_prompt_logprobs"]
    assert all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4) for a, b in zip(normalized, means, strict=True))
    assert state["choice"] == choices[means.index(max(means))]
    plain = pick.run(backend=engine).get_meta_info("choice")["normalized_prompt_logprobs"]
    assert plain != normalized
