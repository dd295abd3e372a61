"""The sglr release version, in a module of its own so that any part of the package can read it
without importing the package's public API (and the language with it)."""

__version__ = "0.1.0"
