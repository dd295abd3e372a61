"""A ReAct agent with a Python tool: the model thinks, calls `calculate[...]`, reads the
observation, and repeats until it answers with `finish[...]`.

    python examples/react_agent.py --backend openai --base-url http://127.0.0.1:30000/v1
"""

from __future__ import annotations

import ast
import operator
import re

import sglr as sgl
from lang_backends import example_args

INSTRUCTIONS = (
    "Answer the question by reasoning step by step. In each reply write one line 'Thought: ...' "
    "and one line with an action: calculate[<arithmetic expression>] or finish[<answer>]."
)
ACTION = re.compile(r"(calculate|finish)\[(.*?)\]")
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def calculate(expression: str) -> str:
    """The tool: evaluates + - * / over numbers (no names, no calls)."""

    def evaluate(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](evaluate(node.left), evaluate(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -evaluate(node.operand)
        raise ValueError(f"unsupported expression: {expression!r}")

    try:
        return f"{evaluate(ast.parse(expression, mode='eval').body):g}"
    except (ValueError, SyntaxError, ZeroDivisionError) as exc:
        return f"error: {exc}"


@sgl.function
def react_agent(s, question, max_steps=5):
    s += sgl.system(INSTRUCTIONS)
    s += sgl.user("Question: " + question)
    for _ in range(max_steps):
        s += sgl.assistant(sgl.gen("step", max_tokens=128, stop="Observation:"))
        action = ACTION.search(s["step"])
        if action is None or action[1] == "finish":
            return action[2] if action else s["step"].strip()
        s += sgl.user("Observation: " + calculate(action[2]))
    return None


def main(argv=None) -> str | None:
    _, backend = example_args(__doc__, argv)
    state = react_agent.run(question="What is 17 * 23 + 4?", backend=backend, temperature=0)
    print(state.ret_value)
    return state.ret_value


if __name__ == "__main__":
    main()
