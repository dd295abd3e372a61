"""Tracer, IR graph (printer, JSON), compiled execution and the constant-prefix pass."""

from __future__ import annotations

import json
import threading

import pytest
from lang_fake_backend import RecordingBackend

import sglr as sgl
from sglr.errors import ProgramError, TraceError
from sglr.lang.compiler import CompiledProgram, constant_prefix_text
from sglr.lang.graph import ProgramGraph


@sgl.function
def tip_suggestion(s, topic):
    s += sgl.system("You give practical advice.")
    s += sgl.user("Give two tips about " + topic + ".")
    with s.assistant():
        s += "1." + sgl.gen("tip1", max_tokens=16, stop="\n") + "\n2." + sgl.gen("tip2", stop="\n")
    forks = s.fork(2)
    forks[0] += sgl.user("Expand: " + s["tip1"])
    forks[1] += sgl.user("Expand: " + s["tip2"])
    forks += sgl.assistant(sgl.gen("detail", max_tokens=32))
    forks.join()
    s += sgl.user("Summarize.") + sgl.assistant(sgl.gen("summary"))


def reply(prompt: str, sp) -> str:
    return f"r{prompt.count('ASSISTANT:')}-{len(prompt)}"


def test_trace_records_nodes_streams_and_dependencies():
    graph = tip_suggestion.trace()
    kinds = [node.kind for node in graph.nodes]
    for kind in ("role_begin", "text", "argument", "gen", "variable", "fork", "get_fork_item", "join"):
        assert kind in kinds, kind
    assert [stream.origin for stream in graph.streams] == ["root", "fork", "fork"]
    by_kind = {kind: [n for n in graph.nodes if n.kind == kind] for kind in set(kinds)}
    fork = by_kind["fork"][0]
    assert [item.dep_ids for item in by_kind["get_fork_item"]] == [(fork.node_id,), (fork.node_id,)]
    gens = {node.expr.name: node for node in by_kind["gen"]}
    variables = by_kind["variable"]
    assert [v.dep_ids for v in variables] == [(gens["tip1"].node_id,), (gens["tip2"].node_id,)]
    assert all(v.stream_id != gens["tip1"].stream_id for v in variables)  # inter-stream edges
    join = by_kind["join"][0]
    assert join.dep_ids == tuple(graph.stream_nodes(i)[-1].node_id for i in (1, 2))  # last node per fork
    for node in graph.nodes:  # ids are a topological order of both edge kinds
        assert all(dep < node.node_id for dep in node.dep_ids)
        assert node.prev_id is None or node.prev_id < node.node_id


def test_printer_shows_streams_and_edges():
    text = tip_suggestion.trace().format()
    assert text.startswith("graph tip_suggestion(topic)")
    assert "stream 1 (fork %" in text
    assert "Argument('topic')" in text
    assert "Variable('tip1', source=%" in text and "    <- %" in text


def test_json_round_trip_and_running_the_deserialized_graph():
    graph = tip_suggestion.trace()
    data = json.loads(graph.to_json())
    assert ProgramGraph.from_dict(data).to_dict() == data
    restored = CompiledProgram(ProgramGraph.from_json(graph.to_json()))
    expected = tip_suggestion.run(topic="tea", backend=RecordingBackend(reply=reply))
    got = restored.run(topic="tea", backend=RecordingBackend(reply=reply))
    assert got.text() == expected.text()
    assert got["detail"] == expected["detail"]


def test_compiled_program_matches_eager_run():
    compiled = tip_suggestion.compile()
    for topic in ("tea", "sleep"):
        eager = tip_suggestion.run(topic=topic, backend=RecordingBackend(reply=reply))
        graph_run = compiled.run(topic=topic, backend=RecordingBackend(reply=reply))
        assert graph_run.text() == eager.text()
        assert graph_run.messages() == eager.messages()
        for name in ("tip1", "tip2", "detail", "summary"):
            assert graph_run[name] == eager[name]


def test_compiled_forks_send_the_hint_and_run_in_parallel():
    barrier = threading.Barrier(2, timeout=10)

    def parallel_reply(prompt: str, sp) -> str:
        if "Expand" in prompt and "Summarize" not in prompt:
            barrier.wait()
        return "x"

    backend = RecordingBackend(reply=parallel_reply)
    state = tip_suggestion.compile().run(topic="tea", backend=backend)
    assert state["detail"] == ["x", "x"]
    kinds = [c.kind for c in backend.calls if c.kind in ("commit_lazy", "generate")]
    assert kinds[:3] == ["generate", "generate", "commit_lazy"]  # the hint precedes both branches


def test_compiled_run_batch_and_errors():
    compiled = tip_suggestion.compile()
    states = compiled.run_batch(
        [{"topic": "a"}, {"topic": "BAD"}],
        backend=RecordingBackend(
            reply=reply, fail_when=lambda prompt: "BAD" in prompt and "Expand" in prompt
        ),
    )
    assert states[0]["summary"]
    with pytest.raises(ProgramError, match=r"Gen\('detail'\)"):
        states[1]["summary"]
    with pytest.raises(TypeError, match="missing arguments: topic"):
        compiled.run(backend=RecordingBackend())


def test_untraceable_programs_say_why_and_where():
    @sgl.function
    def fstring(s, name):
        s += f"Hello {name}"

    with pytest.raises(TraceError, match=r"f-string.*'name'.*test_tracer.py"):
        fstring.trace()

    @sgl.function
    def branching(s):
        s += "Is it good? " + sgl.select("verdict", ["yes", "no"])
        if s["verdict"] == "yes":
            s += "Great"

    with pytest.raises(TraceError, match=r"compares the generated variable 'verdict'.*data-dependent"):
        branching.compile()

    @sgl.function
    def reads_text(s):
        s += "x"
        s.text()

    with pytest.raises(TraceError, match=r"s.text\(\)"):
        reads_text.trace()
    # With a concrete value, the f-string traces fine.
    assert fstring.trace(name="Ann").nodes[0].expr.value == "Hello Ann"


def test_nested_program_calls_become_streams():
    @sgl.function
    def expand(s, tip):
        s += "Expand: " + tip + sgl.gen("paragraph")

    @sgl.function
    def outer(s, topic):
        s += "Tip about " + topic + ": " + sgl.gen("tip", stop="\n")
        first = expand(tip=s["tip"])
        second = expand(tip="constant tip")
        s += "\n" + first["paragraph"] + "\n" + second["paragraph"]

    graph = outer.trace()
    assert [stream.origin for stream in graph.streams] == ["root", "call", "call"]
    compiled = outer.compile().run(topic="t", backend=RecordingBackend(reply=lambda p, sp: f"<{p}>"))
    eager = outer.run(topic="t", backend=RecordingBackend(reply=lambda p, sp: f"<{p}>"))
    assert compiled.text() == (
        "Tip about t: <Tip about t: >\n<Expand: <Tip about t: >>\n<Expand: constant tip>"
    )
    assert eager.text() == compiled.text()


def test_constant_prefix_pass_renders_roles_with_the_backend_template():
    graph = tip_suggestion.trace()
    kinds = [n.kind for n in graph.constant_prefix_nodes()]
    assert kinds == ["role_begin", "text", "role_end", "role_begin", "text"]  # up to Argument('topic')
    prefix = constant_prefix_text(graph, RecordingBackend(chat_template="chatml"))
    assert prefix == (
        "<|im_start|>system\nYou give practical advice.<|im_end|>\n<|im_start|>user\nGive two tips about "
    )
    state = tip_suggestion.run(topic="x", backend=RecordingBackend(chat_template="chatml"))
    assert state.text().startswith(prefix)


def test_prefix_pass_works_for_programs_that_cannot_be_fully_traced():
    @sgl.function
    def agent(s, task):
        s += "You are an agent that uses tools. Think step by step and act. Available: search, calc.\n"
        s += "Task: " + task + "\n"
        for _ in range(3):
            s += "Action: " + sgl.select("action", ["search", "calc", "finish"])
            if s["action"] == "finish":
                break

    backend = RecordingBackend()
    prefix = agent.cache(backend)
    assert prefix.endswith("Task: ")
    assert backend.of_kind("cache_prefix")[0].text == prefix
    with pytest.raises(TraceError):
        agent.compile()
