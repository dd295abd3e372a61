"""The SGLang paper's workloads as sglr programs over seeded synthetic data (see registry.py)."""
