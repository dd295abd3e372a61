"""`load_oracle()`: benches/maskbench_oracle.py (the MaskBench reference checks and
vocabularies) as a module, for the benchmarks that compare against it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

BENCHES = Path(__file__).resolve().parent.parent


def load_oracle() -> Any:
    spec = importlib.util.spec_from_file_location("maskbench_oracle", BENCHES / "maskbench_oracle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
