"""The traced IR graph of a program: nodes in streams, with intra- and inter-stream dependencies.

Every node belongs to one stream (a prompt state). `prev_id` links a node to the previous node of
its stream (the text it extends); `dep_ids` are the nodes of any stream whose result it reads
(a variable's producer, the fork a child stream starts from, the last nodes a join waits for).
Node ids are assigned in trace order, which is a topological order of both kinds of edges.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from sglr.lang import ir
from sglr.lang.choices import choices_method_by_name
from sglr.lang.image_encoding import encode_image_base64


@dataclass
class GraphNode:
    node_id: int
    stream_id: int
    expr: ir.Expr
    prev_id: int | None = None
    dep_ids: tuple[int, ...] = ()

    @property
    def kind(self) -> str:
        return self.expr.kind


@dataclass
class StreamInfo:
    stream_id: int
    #: What started the stream: "root", "call" (a nested program call) or "fork".
    origin: str = "root"
    function_name: str = ""
    fork_id: int | None = None
    fork_index: int | None = None
    num_api_spec_tokens: int | None = None


@dataclass
class ProgramGraph:
    function_name: str
    arg_names: list[str]
    nodes: list[GraphNode] = field(default_factory=list)
    streams: list[StreamInfo] = field(default_factory=list)
    root_stream_id: int = 0

    def stream_nodes(self, stream_id: int) -> list[GraphNode]:
        return [node for node in self.nodes if node.stream_id == stream_id]

    def node(self, node_id: int) -> GraphNode:
        return self.nodes[node_id]

    # --- printer -----------------------------------------------------------------------------------
    def format(self) -> str:
        lines = [f"graph {self.function_name}({', '.join(self.arg_names)})"]
        for stream in self.streams:
            if stream.origin == "fork":
                origin = f"fork %{stream.fork_id} item {stream.fork_index}"
            else:
                origin = f"{stream.origin} {stream.function_name}".strip()
            lines.append(f"stream {stream.stream_id} ({origin}):")
            for node in self.stream_nodes(stream.stream_id):
                rhs = node.expr.describe()
                if node.prev_id is not None:
                    rhs = f"%{node.prev_id} + {rhs}"
                deps = f"    <- {', '.join(f'%{d}' for d in node.dep_ids)}" if node.dep_ids else ""
                lines.append(f"  %{node.node_id} = {rhs}{deps}")
        return "\n".join(lines)

    def print(self) -> None:
        print(self.format())

    def __str__(self) -> str:
        return self.format()

    # --- JSON --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "function_name": self.function_name,
            "arg_names": list(self.arg_names),
            "root_stream_id": self.root_stream_id,
            "streams": [vars(stream).copy() for stream in self.streams],
            "nodes": [
                {
                    "id": node.node_id,
                    "stream": node.stream_id,
                    "prev": node.prev_id,
                    "deps": list(node.dep_ids),
                    **expr_to_dict(node.expr),
                }
                for node in self.nodes
            ],
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgramGraph:
        graph = cls(data["function_name"], list(data["arg_names"]), root_stream_id=data["root_stream_id"])
        graph.streams = [StreamInfo(**stream) for stream in data["streams"]]
        for entry in data["nodes"]:
            graph.nodes.append(
                GraphNode(
                    entry["id"], entry["stream"], expr_from_dict(entry), entry["prev"], tuple(entry["deps"])
                )
            )
        return graph

    @classmethod
    def from_json(cls, text: str) -> ProgramGraph:
        return cls.from_dict(json.loads(text))

    # --- passes ------------------------------------------------------------------------------------
    def constant_prefix_nodes(self) -> list[GraphNode]:
        """The leading nodes of the root stream that are the same in every run: constant text and
        role markers, up to the first argument, generation, fork or variable."""
        prefix = []
        for node in self.stream_nodes(self.root_stream_id):
            if not isinstance(node.expr, (ir.ConstantText, ir.RoleBegin, ir.RoleEnd)):
                break
            prefix.append(node)
        return prefix


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value


def expr_to_dict(expr: ir.Expr) -> dict[str, Any]:
    kind = expr.kind
    if isinstance(expr, ir.ConstantText):
        return {"kind": kind, "value": expr.value}
    if isinstance(expr, (ir.Argument, ir.VarScopeBegin, ir.VarScopeEnd)):
        return {"kind": kind, "name": expr.name}
    if isinstance(expr, ir.Gen):
        return {
            "kind": kind,
            "name": expr.name,
            "params": {k: _jsonable(v) for k, v in expr.overrides.items()},
        }
    if isinstance(expr, ir.Select):
        return {
            "kind": kind,
            "name": expr.name,
            "choices": list(expr.choices),
            "temperature": expr.temperature,
            "choices_method": expr.choices_method.name,
        }
    if isinstance(expr, ir.Image):
        if isinstance(expr.source, str):
            return {"kind": kind, "path": expr.source}
        return {"kind": kind, "base64": encode_image_base64(expr.source)}
    if isinstance(expr, (ir.RoleBegin, ir.RoleEnd)):
        return {"kind": kind, "role": expr.role}
    if isinstance(expr, ir.Variable):
        return {"kind": kind, "name": expr.name, "source": expr.source_id}
    if isinstance(expr, ir.Fork):
        return {"kind": kind, "size": expr.size}
    if isinstance(expr, ir.GetForkItem):
        return {"kind": kind, "fork": expr.fork_id, "index": expr.index}
    if isinstance(expr, ir.Join):
        return {"kind": kind, "children": list(expr.child_last_ids), "mode": expr.mode}
    raise TypeError(f"{expr.describe()} cannot be serialized in a graph")


def expr_from_dict(data: dict[str, Any]) -> ir.Expr:
    kind = data["kind"]
    simple = {
        "argument": ir.Argument,
        "var_scope_begin": ir.VarScopeBegin,
        "var_scope_end": ir.VarScopeEnd,
    }
    if kind == "text":
        return ir.ConstantText(data["value"])
    if kind in simple:
        return simple[kind](data["name"])
    if kind == "gen":
        return ir.Gen(data["name"], dict(data["params"]))
    if kind == "select":
        method = choices_method_by_name(data["choices_method"])
        return ir.Select(data["name"], data["choices"], data["temperature"], method)
    if kind == "image":
        return ir.Image(data["path"] if "path" in data else base64.b64decode(data["base64"]))
    if kind == "role_begin":
        return ir.RoleBegin(data["role"])
    if kind == "role_end":
        return ir.RoleEnd(data["role"])
    if kind == "variable":
        return ir.Variable(data["name"], data["source"])
    if kind == "fork":
        return ir.Fork(data["size"])
    if kind == "get_fork_item":
        return ir.GetForkItem(data["fork"], data["index"])
    if kind == "join":
        return ir.Join(data["children"], data["mode"])
    raise ValueError(f"unknown graph node kind {kind!r}")
