"""The family registry: every module of `sglr.model.families` declares one family, found without
importing torch or numpy; names are unique; each GGUF architecture (with or without experts)
belongs to one family; a family's declaration is what configs, models and GGUF files use."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest
import torch

from sglr.errors import ModelConfigError
from sglr.model import families as families_package
from sglr.model.build import build_model
from sglr.model.config import ModelConfig
from sglr.model.registry import architecture_of_model_type, families, family_of, supported_architectures


def test_every_family_module_is_found() -> None:
    modules = [info.name for info in pkgutil.iter_modules(families_package.__path__)]
    declared = [importlib.import_module(f"sglr.model.families.{name}").FAMILY for name in sorted(modules)]
    assert list(families()) == declared
    assert len(supported_architectures()) == sum(len(f.architectures) for f in declared)


def test_reading_a_config_imports_neither_torch_nor_numpy() -> None:
    code = (
        "import sys\n"
        "from sglr.model.config import ModelConfig\n"
        "raw = {'architectures': ['Qwen3ForCausalLM'], 'vocab_size': 64, 'hidden_size': 16,\n"
        "       'intermediate_size': 32, 'num_hidden_layers': 1, 'num_attention_heads': 2}\n"
        "assert ModelConfig.from_dict(raw).architecture == 'Qwen3ForCausalLM'\n"
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_model_types_and_gguf_layouts_are_unique() -> None:
    model_types = [t for f in families() for t in f.architectures.values() if t is not None]
    assert len(model_types) == len(set(model_types))
    for model_type in model_types:
        assert model_type in family_of(architecture_of_model_type(model_type)).architectures.values()
    layouts = [(f.gguf.architecture, f.experts is not None) for f in families() if f.gguf is not None]
    assert len(layouts) == len(set(layouts))


def test_unknown_architectures_are_named() -> None:
    with pytest.raises(ModelConfigError, match="'FooForCausalLM'"):
        family_of("FooForCausalLM")
    assert architecture_of_model_type("foo") is None


@pytest.mark.parametrize("architecture", ["Qwen3ForCausalLM", "MixtralForCausalLM", "Gemma2ForCausalLM"])
def test_a_model_is_named_by_its_architecture_and_built_with_its_family_options(architecture: str) -> None:
    raw = {
        "architectures": [architecture], "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_local_experts": 2, "num_experts_per_tok": 1,
    }  # fmt: skip
    model = build_model(ModelConfig.from_dict(raw), torch.float32, torch.device("cpu"), 64)
    assert type(model).__name__ == architecture
    assert model.options == family_of(architecture).decoder
