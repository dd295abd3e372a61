"""Backends of the language. `base.BaseBackend` is the protocol; the others import lazily."""
