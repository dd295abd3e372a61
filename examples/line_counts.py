"""Lines of program code: each sglr example next to the same program on the raw `openai` client
with threads. Counts non-blank lines of everything but imports, docstrings, comments and the
command-line `main` (which the sglr examples share through lang_backends.py).

    python examples/line_counts.py
"""

from __future__ import annotations

import ast
import io
import os
import tokenize

HERE = os.path.dirname(os.path.abspath(__file__))
PAIRS = [
    ("essay_judge.py", "raw_openai/essay_judge.py"),
    ("tip_suggestion.py", "raw_openai/tip_suggestion.py"),
]


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and ast.get_docstring(node) is not None
        ):
            first = node.body[0]
            lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def program_lines(path: str) -> int:
    with open(path) as file:
        source = file.read()
    tree = ast.parse(source)
    skipped = _docstring_lines(tree)
    for node in tree.body:
        is_main = isinstance(node, ast.FunctionDef) and node.name == "main"
        is_guard = isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)
        if isinstance(node, (ast.Import, ast.ImportFrom)) or is_main or is_guard:
            skipped.update(range(node.lineno, node.end_lineno + 1))
    code_lines = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type
        not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        and token.type != tokenize.ENDMARKER
    }
    return len(code_lines - skipped)


def line_counts() -> list[tuple[str, int, int]]:
    """(example, sglr lines, raw openai lines) for each pair."""
    return [
        (sglr_file, program_lines(os.path.join(HERE, sglr_file)), program_lines(os.path.join(HERE, raw_file)))
        for sglr_file, raw_file in PAIRS
    ]


def main() -> None:
    print(f"{'program':<22}{'sglr':>6}{'openai+threads':>16}{'ratio':>8}")
    for name, sglr_lines, raw_lines in line_counts():
        print(f"{name:<22}{sglr_lines:>6}{raw_lines:>16}{raw_lines / sglr_lines:>7.1f}x")


if __name__ == "__main__":
    main()
