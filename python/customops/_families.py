"""The family modules of a per-concern package (func, sharding, onnx, inductor, litert, pointwise, functional,
modules): every module in the package whose name does not start with '_', in name order. A new family's module is
found by being there; no concern keeps a list of families by hand."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Dict, Iterable, List


def family_modules(package: str, path: Iterable[str]) -> List[ModuleType]:
    """Imports and returns the family modules of `package` (its ``__name__``), found on `path` (its ``__path__``)."""
    names = sorted(m.name for m in pkgutil.iter_modules(list(path)) if not m.name.startswith("_"))
    return [importlib.import_module(f"{package}.{name}") for name in names]


def exported(families: Iterable[ModuleType]) -> Dict[str, object]:
    """Name -> object for every name the family modules list in their ``__all__``, in family order: what a package
    whose families hold public functions or classes (functional, modules) exports."""
    return {name: getattr(family, name) for family in families for name in family.__all__}
