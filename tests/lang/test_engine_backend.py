"""The in-process engine backend: programs run on an `Engine` passed directly, with the engine's
chat template, streaming, n samples, logprobs, the fork hint, errors, and `select` decisions
checked against log-probabilities computed independently with `transformers`."""

from __future__ import annotations

import math

import pytest
import torch
from lang_engine import make_tiny_engine

import sglr as sgl
from sglr.engine.engine import Engine
from sglr.errors import EngineClosedError, InvalidRequestError, ProgramError
from sglr.lang.backend.base import BaseBackend
from sglr.lang.backend.engine_backend import EngineBackend
from sglr.lang.backend.runtime_endpoint import RuntimeEndpoint
from sglr.lang.chat_template import choose_chat_template

GREEDY = {"temperature": 0}


@sgl.function
def short_chat(s, question, max_tokens=12):
    s += sgl.system("Answer briefly.")
    s += sgl.user(question)
    s += sgl.assistant(sgl.gen("answer", max_tokens=max_tokens))


def chat_prompt(engine: Engine, question: str) -> str:
    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": question}]
    return engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True)


def test_sgl_engine_is_the_in_process_engine():
    assert sgl.Engine is Engine


def test_a_program_runs_on_an_engine_passed_directly(tiny_engine):
    state = short_chat.run(question="What is a cat?", backend=tiny_engine, **GREEDY)
    prompt = chat_prompt(tiny_engine, "What is a cat?")
    # The frontend's chat template, picked from the engine's tokenizer, renders what HF renders.
    assert state.text().startswith(prompt)
    expected = tiny_engine.generate(prompt, {"max_new_tokens": 12, "temperature": 0, "stop": ["<|im_end|>"]})
    assert state["answer"] == expected["text"]
    meta = state.get_meta_info("answer")
    assert meta["prompt_tokens"] == len(tiny_engine.tokenizer.encode(prompt))
    assert meta["completion_tokens"] == len(expected["output_ids"])
    assert state.messages()[-1] == {"role": "assistant", "content": expected["text"].lstrip()}


def test_default_backend_flush_cache_and_server_info_accept_an_engine(tiny_engine):
    sgl.set_default_backend(tiny_engine)
    try:
        state = short_chat.run(question="Hello?", **GREEDY)
        assert state["answer"] == short_chat.run(question="Hello?", backend=tiny_engine, **GREEDY)["answer"]
        info = sgl.get_server_info()
        assert sgl.flush_cache() is True
    finally:
        sgl.set_default_backend(None)
    assert info["model_path"] == tiny_engine.model_path
    assert info["internal_states"][0]["num_requests"] >= 2
    assert tiny_engine.get_stats()["num_cached_kv_slots"] == 0  # the flush emptied the cache


def public_methods(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def test_an_engine_answers_the_whole_backend_protocol_however_it_is_given(tiny_engine):
    @sgl.function
    def probe(s):
        s += "Hi" + sgl.gen("x", max_tokens=1)

    @sgl.function
    def outer(s):
        s += "Hi"
        s["inner"] = probe()  # a nested call runs on the calling program's backend

    backends = {}
    sgl.set_default_backend(tiny_engine)
    try:
        backends["set_default_backend"] = sgl.global_config.default_backend
        backends["run on the default"] = probe.run(**GREEDY).stream_executor.backend
        backends["nested call"] = outer.run(**GREEDY)["inner"].stream_executor.backend
    finally:
        sgl.set_default_backend(None)
    backends["run(backend=)"] = probe.run(backend=tiny_engine, **GREEDY).stream_executor.backend
    batch = probe.run_batch([{}, {}], backend=tiny_engine, **GREEDY)
    backends["run_batch(backend=)"] = batch[0].stream_executor.backend
    backends["compiled run(backend=)"] = probe.compile().run(backend=tiny_engine).stream_executor.backend
    backends["EngineBackend(engine)"] = EngineBackend(tiny_engine)

    expected_methods = public_methods(BaseBackend) | public_methods(RuntimeEndpoint)
    template = choose_chat_template(
        model_path=tiny_engine.model_path, tokenizer_template=tiny_engine.tokenizer.chat_template
    )
    for how, backend in backends.items():
        assert isinstance(backend, EngineBackend) and backend.engine is tiny_engine, how
        assert not expected_methods - public_methods(type(backend)), how
        assert backend.get_model_name() == tiny_engine.served_model_name, how
        assert backend.get_chat_template() == template, how
        assert backend.get_server_info()["model_path"] == tiny_engine.model_path, how


def test_n_samples_logprobs_and_stop_regex(tiny_engine):
    @sgl.function
    def sampled(s):
        s += "Once upon a time"
        s += sgl.gen("many", max_tokens=6, n=3, temperature=1.0)
        s += sgl.gen("scored", max_tokens=5, return_logprob=True, top_logprobs_num=2, temperature=0)

    state = sampled.run(backend=tiny_engine)
    assert isinstance(state["many"], list) and len(state["many"]) == 3
    assert state.text().startswith("Once upon a time" + state["many"][0])
    meta = state.get_meta_info("scored")
    assert len(meta["output_token_logprobs"]) == meta["completion_tokens"] == 5
    assert all(len(top) == 2 for top in meta["output_top_logprobs"])

    full = tiny_engine.generate("Once upon a time", {"max_new_tokens": 16, "temperature": 0})["text"]
    stop_char = full.strip()[3]

    @sgl.function
    def stopped(s):
        s += "Once upon a time" + sgl.gen("x", max_tokens=16, stop_regex=["[" + stop_char + "]"])

    value = stopped.run(backend=tiny_engine, **GREEDY)["x"]
    assert value == full[: full.index(stop_char)]


def test_streaming_yields_the_same_text_in_pieces(tiny_engine):
    whole = short_chat.run(question="Tell me more.", max_tokens=24, backend=tiny_engine, **GREEDY)
    state = short_chat.run(
        question="Tell me more.",
        max_tokens=24,
        backend=tiny_engine,
        stream=True,
        return_logprob=True,
        **GREEDY,
    )
    pieces = list(state.text_iter("answer"))
    assert "".join(pieces) == whole["answer"] == state["answer"]
    assert len(pieces) > 1
    meta = state.get_meta_info("answer")
    assert len(meta["output_token_logprobs"]) == meta["completion_tokens"]


def test_fork_caches_the_shared_prefix_before_the_branches(tiny_engine):
    shared = "Here is a long shared context that every branch reads before answering. " * 4

    @sgl.function
    def branches(s):
        s += sgl.user(shared)
        forks = s.fork(3)
        forks += lambda i: sgl.assistant(f"Branch {i}:" + sgl.gen("x", max_tokens=4))
        forks.join()

    sgl.flush_cache(tiny_engine)
    before = tiny_engine.get_stats()
    state = branches.run(backend=tiny_engine, **GREEDY)
    assert len(state["x"]) == 3
    after = tiny_engine.get_stats()
    assert after["num_requests"] - before["num_requests"] == 4  # the prefix hint + 3 branches
    prefix_len = len(tiny_engine.tokenizer.encode(state.text()))  # the parent holds the shared prefix
    cached = [meta["cached_tokens"] for meta in state.get_meta_info("x")]
    assert all(c >= prefix_len - 1 for c in cached), (cached, prefix_len)


def test_errors_name_the_primitive_and_are_raised_where_read(tiny_engine):
    @sgl.function
    def bad_select(s):
        s += "Pick:" + sgl.select("choice", choices=["a", "b"], temperature=0.7)

    with pytest.raises(ProgramError, match=r"Select\('choice'.*greedy"):
        bad_select.run(backend=tiny_engine)["choice"]

    @sgl.function
    def bad_regex(s):
        s += "Go" + sgl.gen("x", max_tokens=4, stop_regex="(")

    with pytest.raises(ProgramError, match=r"Gen\('x'\).*stop_regex") as raised:
        bad_regex.run(backend=tiny_engine)["x"]
    assert isinstance(raised.value.__cause__, InvalidRequestError)

    @sgl.function
    def too_long(s):
        s += "Go" + sgl.gen("x", max_tokens=10**7)

    with pytest.raises(ProgramError, match="context length"):
        too_long.run(backend=tiny_engine).text()


def test_run_batch_caches_the_constant_prefix_and_compiled_runs_match_eager(tiny_engine):
    instructions = "You are a careful assistant. Read the question and answer it in a few words. " * 2

    @sgl.function
    def answer(s, question):
        s += sgl.system(instructions)
        s += sgl.user(question)
        s += sgl.assistant(sgl.gen("answer", max_tokens=6))

    sgl.flush_cache(tiny_engine)
    questions = [f"Question number {i}?" for i in range(4)]
    states = answer.run_batch([{"question": q} for q in questions], backend=tiny_engine, **GREEDY)
    prefix_len = len(tiny_engine.tokenizer.encode(answer.cache(tiny_engine)))
    assert all(st.get_meta_info("answer")["cached_tokens"] >= prefix_len - 1 for st in states)
    compiled = answer.compile()
    for question, state in zip(questions, states, strict=True):
        graph_run = compiled.run(question=question, backend=tiny_engine, **GREEDY)
        assert graph_run.text() == state.text()


def test_text_async_iter_on_the_engine(tiny_engine):
    import asyncio

    state = short_chat.run(question="Stream?", max_tokens=10, backend=tiny_engine, stream=True, **GREEDY)

    async def collect():
        return [chunk async for chunk in state.text_async_iter("answer")]

    chunks = asyncio.run(collect())
    assert "".join(chunks) == state["answer"]
    assert (
        state["answer"]
        == short_chat.run(question="Stream?", max_tokens=10, backend=tiny_engine, **GREEDY)["answer"]
    )


def test_a_backend_built_from_options_owns_its_engine(tiny_llama_dir, tiny_engine):
    backend = EngineBackend(model_path=str(tiny_llama_dir), device="cpu", max_total_tokens=2048)
    assert short_chat.run(question="Hi", backend=backend, max_tokens=3, **GREEDY)["answer"] is not None
    backend.shutdown()
    with pytest.raises(EngineClosedError):
        backend.engine.generate("Hi", {"max_new_tokens": 1})
    with pytest.raises(TypeError, match="not both"):
        EngineBackend(tiny_engine, device="cpu")
    EngineBackend(tiny_engine).shutdown()  # a wrapped engine belongs to its caller
    assert tiny_engine.generate("Hi", {"max_new_tokens": 1})["meta_info"]["completion_tokens"] == 1


# --- select, checked against transformers ------------------------------------------------------


@pytest.fixture(scope="module")
def hf_model(tiny_llama_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir), dtype=torch.float32).eval()


def reference_scores(model, tokenizer, prompt: str, choices: list[str]) -> dict[str, list]:
    """Per choice: the logprobs of its tokens after the prompt, and of its tokens alone."""
    prompt_ids = tokenizer.encode(prompt)
    conditional, unconditional = [], []
    for choice in choices:
        ids = tokenizer.encode(prompt + choice)
        start = 0
        while start < len(prompt_ids) and prompt_ids[start] == ids[start]:
            start += 1
        with torch.no_grad():
            logprobs = model(torch.tensor([ids])).logits[0].log_softmax(-1)
            conditional.append([logprobs[i - 1, ids[i]].item() for i in range(start, len(ids))])
            alone = ids[start:]
            alone_logprobs = model(torch.tensor([alone])).logits[0].log_softmax(-1)
            unconditional.append(
                [0.0] + [alone_logprobs[i - 1, alone[i]].item() for i in range(1, len(alone))]
            )
    return {"conditional": conditional, "unconditional": unconditional}


def expected_choice(method: str, scores: dict[str, list]) -> tuple[int, list[float]]:
    conditional = scores["conditional"]
    means = [sum(row) / len(row) for row in conditional]
    if method == "token_length_normalized":
        return means.index(max(means)), means
    if method == "unconditional_likelihood_normalized":
        gains = [
            sum(c - u for c, u in zip(cond, uncond, strict=True)) / len(cond)
            for cond, uncond in zip(conditional, scores["unconditional"], strict=True)
        ]
        return gains.index(max(gains)), means
    width = max(len(row) for row in conditional)
    padded = [row + [sum(row) / len(row)] * (width - len(row)) for row in conditional]
    alive = list(range(len(conditional)))
    for column in range(width):
        if len(alive) == 1:
            break
        best = max(padded[i][column] for i in alive)
        alive = [i for i in alive if padded[i][column] == best]
    return alive[0], means


SELECT_CASES = [
    ("The weather today is", ["sunny", "rainy", "cold and windy", "unknown"]),
    ("Answer: ", ["yes", "no", "maybe"]),
    ("My favourite number is ", ["7", "42", "1000"]),
    ("Q: Which fruit is red?\nA:", [" apple", " banana", " a lemon", " grape"]),
    ("Pick a colour -", ["red", "green", "blue", "violet", "black"]),
]


@pytest.mark.parametrize(
    "method",
    [sgl.token_length_normalized, sgl.greedy_token_selection, sgl.unconditional_likelihood_normalized],
)
def test_select_picks_the_choice_with_the_best_independent_score(tiny_engine, hf_model, method):
    @sgl.function
    def pick(s, prompt, choices):
        s += prompt + sgl.select("choice", choices=choices, choices_method=method)

    decisions = []
    for prompt, choices in SELECT_CASES:
        state = pick.run(prompt=prompt, choices=choices, backend=tiny_engine)
        best, means = expected_choice(
            method.name, reference_scores(hf_model, tiny_engine.tokenizer, prompt, choices)
        )
        assert state["choice"] == choices[best], (prompt, method.name)
        assert state.text() == prompt + choices[best]
        normalized = state.get_meta_info("choice")["normalized_prompt_logprobs"]
        assert all(
            math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4) for a, b in zip(normalized, means, strict=True)
        )
        decisions.append(best)
    assert any(d != 0 for d in decisions)  # the cases do not all favour the first choice


def test_select_in_a_chat_turn_and_choice_of_one_token(tiny_engine, hf_model):
    @sgl.function
    def classify(s, text):
        s += sgl.user("Is this positive or negative? " + text)
        s += sgl.assistant(sgl.gen("label", choices=["positive", "negative"]))

    state = classify.run(text="What a lovely day.", backend=tiny_engine)
    prompt = state.text()[: state.text().rindex(state["label"])]
    best, _ = expected_choice(
        "token_length_normalized",
        reference_scores(hf_model, tiny_engine.tokenizer, prompt, ["positive", "negative"]),
    )
    assert state["label"] == ["positive", "negative"][best]
    assert state.messages()[-1] == {"role": "assistant", "content": state["label"]}


# --- interpreter parallelism: 8 forked branches decode in one batch -----------------------------


@sgl.function
def fan_out(s, num_branches, num_tokens):
    s += sgl.user("Write a few words about the sea. " * 8)
    forks = s.fork(num_branches)
    forks += lambda i: sgl.assistant(f"Idea {i}:" + sgl.gen("idea", max_tokens=num_tokens, ignore_eos=True))
    forks.join()


def run_fan_out(engine: Engine, num_branches: int, num_tokens: int) -> dict[str, float]:
    import time

    sgl.flush_cache(engine)
    before = engine.get_stats()
    started = time.perf_counter()
    state = fan_out.run(num_branches=num_branches, num_tokens=num_tokens, backend=engine, **GREEDY)
    assert len(state["idea"]) == num_branches
    seconds = time.perf_counter() - started
    after = engine.get_stats()
    delta = {
        key: after[key] - before[key] for key in ("num_decode_passes", "num_decode_seqs", "num_extend_passes")
    }
    return {**delta, "seconds": seconds, "max_decode_batch_size": after["max_decode_batch_size"]}


def test_eight_forked_branches_decode_in_the_same_batches(tiny_llama_dir):
    engine = make_tiny_engine(tiny_llama_dir, debug_invariants=False)
    try:
        num_tokens = 32
        run_fan_out(engine, 1, 4)  # warm up
        one = run_fan_out(engine, 1, num_tokens)
        eight = run_fan_out(engine, 8, num_tokens)
    finally:
        engine.shutdown()
    print(
        f"\n1 branch: {one}\n8 branches: {eight}\nlatency ratio 8/1: {eight['seconds'] / one['seconds']:.2f}"
    )
    # Every branch decodes num_tokens - 1 tokens (the first comes from its prefill).
    assert one["num_decode_seqs"] == one["num_decode_passes"] == num_tokens - 1
    assert eight["num_decode_seqs"] == 8 * (num_tokens - 1)
    assert eight["max_decode_batch_size"] == 8
    # Sequential branches would need 8x the passes; batched ones need a few more than one branch.
    assert eight["num_decode_passes"] <= one["num_decode_passes"] + 8
    assert eight["num_decode_seqs"] / eight["num_decode_passes"] >= 6


def test_gen_with_an_ebnf_grammar(tiny_engine):
    @sgl.function
    def answer(s):
        s += "Q: pick one. A: " + sgl.gen(
            "x", max_tokens=16, ebnf='root ::= "The answer is " ("A" | "B") "."'
        )

    assert answer.run(backend=tiny_engine)["x"] in ("The answer is A.", "The answer is B.")


def test_gen_with_tools_needs_a_chat_completions_backend(tiny_engine):
    @sgl.function
    def ask(s):
        s += "Q: weather? A: " + sgl.gen(
            "x", max_tokens=4, tools=[{"type": "function", "function": {"name": "f"}}]
        )

    error = ask.run(backend=tiny_engine).error()
    assert error is not None and "needs a chat-completions backend" in str(error)
