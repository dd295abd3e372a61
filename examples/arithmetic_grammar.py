"""A context-free grammar (EBNF): the model writes an arithmetic expression with nested
parentheses, a language no regular expression describes; the program evaluates it.

    python examples/arithmetic_grammar.py [--backend engine --model-path PATH]
"""

from __future__ import annotations

import ast
import operator

import sglr as sgl
from lang_backends import example_args

# Recursion through `factor ::= "(" expr ")"` is what makes this grammar context-free.
EXPRESSION_GRAMMAR = r"""
root   ::= expr
expr   ::= term (" " ("+" | "-") " " term){0,3}
term   ::= factor (" " "*" " " factor){0,2}
factor ::= number | "(" expr ")"
number ::= [1-9] [0-9]?
"""
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def evaluate(expression: str) -> int:
    """The value of an expression the grammar allows (integers, +, -, *, parentheses)."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"not an expression of the grammar: {expression!r}")

    return value(ast.parse(expression, mode="eval").body)


@sgl.function
def write_expression(s, target):
    s += sgl.user(f"Write an arithmetic expression whose value is {target}. Reply with the expression only.")
    s += sgl.assistant(sgl.gen("expression", max_tokens=48, ebnf=EXPRESSION_GRAMMAR))


def main(argv=None) -> dict:
    _, backend = example_args(__doc__, argv)
    expression = write_expression.run(target=24, backend=backend, temperature=0)["expression"]
    result = {"expression": expression, "value": evaluate(expression)}
    print(f"{expression} = {result['value']}")
    return result


if __name__ == "__main__":
    main()
