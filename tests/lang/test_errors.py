"""Errors surface where results are read, name the failing primitive, and never hang."""

from __future__ import annotations

import pytest
from lang_fake_backend import RecordingBackend

import sglr as sgl
from sglr.errors import ProgramError


def failing_backend(marker: str = "BAD") -> RecordingBackend:
    return RecordingBackend(reply=lambda prompt, sp: "ok", fail_when=lambda prompt: marker in prompt)


def test_failed_gen_raises_on_read_naming_the_primitive():
    @sgl.function
    def program(s):
        s += "fine " + sgl.gen("first")
        s += " BAD " + sgl.gen("second")
        s += " never " + sgl.gen("third")

    state = program.run(backend=failing_backend())
    assert state["first"] == "ok"  # produced before the failure
    with pytest.raises(ProgramError, match=r"Gen\('second'\) failed: RuntimeError: scripted failure") as info:
        state["second"]
    assert info.value.primitive == "Gen('second')"
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(ProgramError, match=r"variable 'third'.*Gen\('second'\)"):
        state["third"]
    with pytest.raises(ProgramError, match="program text"):
        state.text()
    assert isinstance(state.error(), ProgramError)


def test_unknown_variable_is_a_key_error_not_a_hang():
    @sgl.function
    def program(s):
        s += "x" + sgl.gen("real")

    state = program.run(backend=RecordingBackend())
    with pytest.raises(KeyError, match=r"no variable 'typo'.*real"):
        state["typo"]


def test_nested_roles_and_mismatched_role_end_are_reported():
    @sgl.function
    def nested(s):
        s += sgl.user_begin() + sgl.assistant("x") + sgl.user_end()

    with pytest.raises(ProgramError, match=r"RoleBegin\('assistant'\).*Nested roles"):
        nested.run(backend=RecordingBackend()).text()

    @sgl.function
    def unopened(s):
        s += sgl.user_end()

    with pytest.raises(ProgramError, match="open role is None"):
        unopened.run(backend=RecordingBackend()).text()


def test_a_failing_fork_is_named_by_join_and_other_forks_finish():
    backend = failing_backend()

    @sgl.function
    def program(s):
        s += "base"
        forks = s.fork(3)
        forks += lambda i: (" BAD" if i == 1 else " good") + sgl.gen("out")
        forks.join()

    with pytest.raises(ProgramError, match=r"fork 1 of 3 failed.*Gen\('out'\)"):
        program.run(backend=backend)
    # The healthy forks still ran to completion.
    assert sum(1 for call in backend.of_kind("generate") if "good" in call.text) == 2


def test_exception_in_program_body_propagates_from_run():
    @sgl.function
    def program(s):
        s += "x" + sgl.gen("a")
        raise LookupError("user bug")

    with pytest.raises(LookupError, match="user bug"):
        program.run(backend=RecordingBackend())


def test_run_batch_isolates_failures_and_keeps_order():
    @sgl.function
    def program(s, word):
        if word == "raise":
            raise ArithmeticError("body failure")
        s += word + " " + sgl.gen("out")

    states = program.run_batch(
        [{"word": "one"}, {"word": "BAD"}, {"word": "raise"}, {"word": "four"}],
        backend=failing_backend(),
        num_threads=4,
    )
    assert states[0]["out"] == "ok" and states[3]["out"] == "ok"
    with pytest.raises(ProgramError, match=r"Gen\('out'\)"):
        states[1]["out"]
    with pytest.raises(ProgramError, match=r"program\(\) failed: ArithmeticError: body failure"):
        states[2].text()
    assert states[0].text() == "one ok"


def test_streaming_program_error_ends_the_iterator_with_the_error():
    @sgl.function
    def program(s):
        s += "start "
        s += "BAD" + sgl.gen("x")

    state = program.run(backend=failing_backend(), stream=True)
    chunks = []
    with pytest.raises(ProgramError, match=r"Gen\('x'\)"):
        for chunk in state.text_iter():
            chunks.append(chunk)
    assert "".join(chunks) == "start BAD"


def test_reading_a_speculative_chat_variable_inside_its_turn_fails_fast():
    backend = RecordingBackend(reply=lambda p, sp: "Name: Al")
    backend.is_chat_model = True

    @sgl.function(num_api_spec_tokens=16)
    def program(s):
        s += sgl.user("who?")
        with s.assistant():
            s += "Name: " + sgl.gen("name", stop="\n")
            s["name"]

    with pytest.raises(ProgramError, match="inside the assistant turn"):
        program.run(backend=backend)


def test_appending_after_the_program_ended_is_an_error():
    @sgl.function
    def program(s):
        s += "x"

    state = program.run(backend=RecordingBackend())
    with pytest.raises(ProgramError, match="has ended"):
        state += "more"
