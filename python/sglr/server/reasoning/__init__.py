"""Reasoning output (a thinking model's `<think>...</think>`) kept apart from the reply's content:
the formats (`formats.py`), the incremental splitter streams and whole replies share (`split.py`),
and what one chat request asks for (`chat.py`)."""
