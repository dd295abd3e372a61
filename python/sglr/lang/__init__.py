"""The sglr language: primitives, interpreter, tracer/compiler and backends.

`import sglr as sgl` re-exports the public names; see `api.py` for the primitives.
"""
