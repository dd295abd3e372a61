"""The sglr language: primitives, interpreter, tracer/compiler and backends."""
