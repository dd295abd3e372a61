"""Shared helpers of the Python benchmarks (run the scripts from the repository root)."""
