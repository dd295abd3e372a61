"""Interpreter mechanics on a recording backend: async submission, roles, variables, fork/join."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from lang_fake_backend import RecordingBackend

import sglr as sgl
from sglr import errors as sgl_errors


def test_text_variables_and_default_sampling_params():
    backend = RecordingBackend(reply=lambda prompt, sp: "42")

    @sgl.function
    def qa(s, question):
        s += "Q: " + question + "\nA: " + sgl.gen("answer", max_tokens=8, stop="\n")

    state = qa.run(question="6*7?", backend=backend, temperature=0.25, max_new_tokens=64)
    assert state["answer"] == "42"
    assert state.text() == "Q: 6*7?\nA: 42"
    params = backend.of_kind("generate")[0].params
    assert (params.max_new_tokens, params.temperature, params.stop) == (8, 0.25, ("\n",))
    assert "answer" in state and "missing" not in state


def test_call_syntax_binds_and_positional_args():
    backend = RecordingBackend(reply=lambda prompt, sp: "!")

    @sgl.function
    def greet(s, name, punctuation="?"):
        s += "Hi " + name + punctuation + sgl.gen("x", max_tokens=1)

    sgl.set_default_backend(backend)
    try:
        assert greet("Ann").text() == "Hi Ann?!"
        assert greet.bind(punctuation=".")(name="Bo").text() == "Hi Bo.!"
    finally:
        sgl.set_default_backend(None)
    with pytest.raises(ValueError, match="specify a backend"):
        greet("Cy")


def test_first_parameter_must_be_s():
    with pytest.raises(ValueError, match='first argument must be "s"'):
        sgl.function(lambda state: None)


def test_submission_is_asynchronous_and_reads_block_until_ready():
    release = threading.Event()
    started = threading.Event()

    def reply(prompt: str, sp) -> str:
        started.set()
        assert release.wait(10)
        return "done"

    @sgl.function
    def slow(s):
        s += "go " + sgl.gen("out")
        s += " after"

    state = slow.run(backend=RecordingBackend(reply=reply))
    # run() returned while the backend call is still blocked.
    assert started.wait(10)
    assert not release.is_set()
    reader_result = []
    reader = threading.Thread(target=lambda: reader_result.append(state["out"]))
    reader.start()
    reader.join(0.05)
    assert reader.is_alive() and reader_result == []  # still waiting for the gen
    release.set()
    reader.join(10)
    assert reader_result == ["done"]
    assert state.text() == "go done after"


def test_roles_build_text_and_messages():
    backend = RecordingBackend(reply=lambda prompt, sp: " fine ", chat_template="chatml")

    @sgl.function
    def chat(s):
        s += sgl.system("Be brief.")
        with s.user():
            s += "How are you?"
        s += sgl.assistant(sgl.gen("reply", stop="."))
        s += sgl.user_begin() + "Bye" + sgl.user_end()

    state = chat.run(backend=backend)
    assert state.text() == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
        "<|im_start|>assistant\n fine <|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
    )
    assert state.messages() == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "How are you?"},
        {"role": "assistant", "content": "fine "},
        {"role": "user", "content": "Bye"},
    ]
    # The template's end-of-turn string is added to the gen's stops.
    assert backend.of_kind("generate")[0].params.stop == (".", "<|im_end|>")


def test_default_system_prompt_is_inserted_before_the_first_turn():
    backend = RecordingBackend(chat_template="qwen")

    @sgl.function
    def chat(s):
        s += sgl.user("hi")

    state = chat.run(backend=backend)
    assert state.messages()[0] == {"role": "system", "content": "You are a helpful assistant."}
    assert state.text().startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")


def test_var_scope_and_set_var():
    @sgl.function
    def scoped(s):
        with s.var_scope("block"):
            s += "inside " + sgl.gen(max_tokens=2)
        s += " outside"
        s["manual"] = 7

    state = scoped.run(backend=RecordingBackend(reply=lambda p, sp: "g"))
    assert state["block"] == "inside g"
    assert state["manual"] == 7


def test_fork_sends_the_prefix_hint_before_branches_which_run_in_parallel():
    barrier = threading.Barrier(3, timeout=10)

    def reply(prompt: str, sp) -> str:
        if prompt.startswith("Tips") and "Summary" not in prompt:
            barrier.wait()  # all three branches must be in flight at once, or this times out
            return prompt[-2]
        return "sum"

    backend = RecordingBackend(reply=reply)

    @sgl.function
    def tips(s, topic):
        s += "Tips about " + topic + ":\n"
        forks = s.fork(3)
        for i, fork in enumerate(forks):
            fork += f"{i + 1}." + sgl.gen("tip", max_tokens=8)
        forks.join()
        s += "Summary: " + sgl.gen("summary", max_tokens=4)

    state = tips.run(topic="tea", backend=backend)
    assert state["tip"] == ["1", "2", "3"]  # fork order, whatever the completion order
    kinds = [call.kind for call in backend.calls if call.kind in ("commit_lazy", "generate")]
    assert kinds[0] == "commit_lazy"
    assert backend.calls[[c.kind for c in backend.calls].index("commit_lazy")].text == "Tips about tea:\n"
    branch_calls = backend.of_kind("generate")[:3]
    assert {call.thread for call in branch_calls} != {threading.current_thread().name}
    assert len({call.thread for call in branch_calls}) == 3
    assert state["summary"] == "sum"


def test_fork_group_appends_and_reads_without_join():
    backend = RecordingBackend(reply=lambda prompt, sp: prompt.split()[-1])

    @sgl.function
    def group(s):
        s += "Start"
        forks = s.fork(2)
        forks += [" left", " right"]
        forks += lambda i: f" #{i}" + sgl.gen("echo")
        forks += sgl.gen("again")
        s += " / " + forks[0]["echo"] + " / " + forks[1]["echo"]
        with pytest.raises(ValueError, match="Invalid value"):
            forks += "plain string"
        with pytest.raises(ValueError, match="2 forks"):
            forks += ["a", "b", "c"]

    state = group.run(backend=backend)
    assert state.text() == "Start / #0 / #1"
    assert "echo" not in state  # only join gathers


def test_fork_of_one_sends_no_hint_and_copy_context_manager():
    backend = RecordingBackend(reply=lambda prompt, sp: "x")

    @sgl.function
    def copied(s):
        s += "base"
        with s.copy() as child:
            child += sgl.gen("side")
        s += " end"

    state = copied.run(backend=backend)
    assert state["side"] == ["x"]
    assert state.text() == "base end"
    assert "commit_lazy" not in backend.kinds()


def test_join_concate_and_append_appends_fork_text():
    @sgl.function
    def merged(s):
        s += "P:"
        forks = s.fork(2)
        forks += lambda i: f"[{i}]"
        forks.join(mode="concate_and_append")
        with pytest.raises(ValueError, match="Invalid join mode"):
            s.fork(2).join(mode="zip")

    assert merged.run(backend=RecordingBackend()).text() == "P:[0][1]"


def test_n_samples_store_a_list_and_append_the_first():
    @sgl.function
    def many(s):
        s += "x" + sgl.gen("samples", n=3)

    state = many.run(backend=RecordingBackend(reply=lambda p, sp: "s"))
    assert state["samples"] == ["s0", "s1", "s2"]
    assert state.text() == "xs0"


def test_gen_with_choices_is_select_and_choice_methods():
    def choice_logprobs(prompt: str, choice: str) -> list[float]:
        return {"alpha": [-1.0, -1.0], "beta": [-0.5, -3.0], "gamma": [-2.0]}[choice]

    backend = RecordingBackend(choice_logprobs=choice_logprobs)

    @sgl.function
    def pick(s):
        s += "Pick: " + sgl.gen("mean", choices=["alpha", "beta", "gamma"])
        s += " " + sgl.select("greedy", ["alpha", "beta", "gamma"], choices_method=sgl.greedy_token_selection)

    state = pick.run(backend=backend)
    assert state["mean"] == "alpha"  # mean -1.0 beats -1.75 and -2.0
    assert state["greedy"] == "beta"  # first token -0.5 beats -1.0 and -2.0
    assert state.text() == "Pick: alpha beta"
    assert state.get_meta_info("mean")["normalized_prompt_logprobs"] == [-1.0, -1.75, -2.0]


def test_bad_primitive_arguments_fail_at_the_users_line():
    with pytest.raises(ValueError, match="invalid regex"):
        sgl.gen("x", regex="(")
    with pytest.raises(ValueError, match="temperature"):
        sgl.gen("x", temperature=-1)
    with pytest.raises(ValueError, match="dtype"):
        sgl.gen("x", dtype=list)
    with pytest.raises(ValueError, match="choices"):
        sgl.select("x", choices=[])
    with pytest.warns(UserWarning, match="Only dtype"):
        assert sgl.gen("x", dtype=int, regex="[0-9]").overrides == {"dtype": "int"}
    assert sgl.gen("x", json_schema={"type": "object"}).overrides["json_schema"] == '{"type": "object"}'

    @sgl.function
    def appends(s, value):
        s += value

    backend = RecordingBackend()
    with pytest.raises(ValueError, match="append None"):
        appends.run(value=None, backend=backend)
    with pytest.raises(TypeError, match="str\\(\\)"):
        appends.run(value=3, backend=backend)


def test_images_enter_text_messages_and_backend_state():
    backend = RecordingBackend(reply=lambda prompt, sp: "a cat", chat_template="llama-3-instruct")

    @sgl.function
    def describe(s, picture):
        s += sgl.user(sgl.image(picture) + "What is this?")
        s += sgl.assistant(sgl.gen("caption"))

    state = describe.run(picture=b"\x89PNG fake bytes", backend=backend)
    assert state["caption"] == "a cat"
    assert "<|image|>What is this?" in state.text()
    content = state.messages()[0]["content"]
    # The image part stands where its token was; the token itself stays out of the text part.
    assert content[0]["image_url"]["url"] == "data:image/jpeg;base64,iVBORyBmYWtlIGJ5dGVz"
    assert content[1] == {"type": "text", "text": "What is this?"}
    assert state.stream_executor.images_ == [("bytes", "iVBORyBmYWtlIGJ5dGVz")]
    with pytest.raises(sgl_errors.ProgramError, match="cannot read an image from a int"):
        describe.run(picture=7, backend=backend).text()


def test_use_thread_false_runs_inline():
    @sgl.function
    def inline(s, q):
        s += "Q: " + q + sgl.gen("a")
        forks = s.fork(2)
        forks += lambda i: str(i) + sgl.gen("b")
        forks.join()

    backend = RecordingBackend(reply=lambda prompt, sp: prompt[-1])
    state = inline.run(q="hi", backend=backend, use_thread=False)
    assert state.text() == "Q: hii" and state["b"] == ["0", "1"]
    assert {call.thread for call in backend.of_kind("generate")} == {threading.current_thread().name}


def test_importing_sglr_loads_no_heavy_modules():
    code = (
        "import sys, sglr; sglr.gen; print(sorted({'torch', 'httpx', 'openai', 'numpy'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_videos_enter_text_and_backend_state_as_base64_frames():
    backend = RecordingBackend(reply=lambda prompt, sp: "a dance")

    @sgl.function
    def describe(s, clip):
        s += "Watch " + sgl.video(clip) + " now:"
        s += sgl.gen("caption")

    state = describe.run(clip=[b"frame one", b"frame two"], backend=backend)
    assert state["caption"] == "a dance"
    assert "Watch <video> now:" in state.text()
    assert state.stream_executor.videos_ == [("list", ["ZnJhbWUgb25l", "ZnJhbWUgdHdv"])]
    with pytest.raises(sgl_errors.ProgramError, match="cannot read a video from a int"):
        describe.run(clip=7, backend=backend).text()
