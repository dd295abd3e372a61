"""The model families sglr runs, found in `sglr.model.families`: every module there declares one
`FAMILY` (a `sglr.model.family.Family`), so a new family is one new module. The modules are
imported the first time a family is looked up, not when this module is; none imports torch
(`sglr.model.build` builds a family's model).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from sglr.errors import ModelConfigError
from sglr.model.family import Family

FAMILIES_PACKAGE = "sglr.model.families"


@functools.cache
def _declared() -> dict[str, Family]:
    """Module name -> its family, in module name order."""
    package = importlib.import_module(FAMILIES_PACKAGE)
    declared = {}
    for module_info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{FAMILIES_PACKAGE}.{module_info.name}")
        family = getattr(module, "FAMILY", None)
        if not isinstance(family, Family):
            raise TypeError(f"{module.__name__} declares no FAMILY (a sglr.model.family.Family)")
        declared[module_info.name] = family
    return declared


def families() -> tuple[Family, ...]:
    """Every declared family, by module name."""
    return tuple(_declared().values())


@functools.cache
def _by_architecture() -> dict[str, Family]:
    by_name: dict[str, Family] = {}
    owner: dict[str, str] = {}
    for module_name, family in _declared().items():
        for architecture in family.architectures:
            if architecture in by_name:
                raise TypeError(
                    f"{architecture} is declared by families.{owner[architecture]} and {module_name}"
                )
            by_name[architecture], owner[architecture] = family, module_name
    return by_name


def supported_architectures() -> tuple[str, ...]:
    return tuple(_by_architecture())


def find_family(architecture: str) -> Family | None:
    return _by_architecture().get(architecture)


def family_of(architecture: str) -> Family:
    """The family of `architecture`; `ModelConfigError` naming it when sglr has none."""
    family = find_family(architecture)
    if family is None:
        raise ModelConfigError(
            f"unsupported architecture {architecture!r}; sglr supports {supported_architectures()}"
        )
    return family


def architecture_of_model_type(model_type: object) -> str | None:
    """The architecture a `config.json` without an "architectures" list means by `model_type`."""
    if model_type is None:
        return None
    for architecture, family in _by_architecture().items():
        if family.architectures[architecture] == model_type:
            return architecture
    return None
