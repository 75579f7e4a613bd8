"""The family modules of a per-concern package (func, sharding, onnx, inductor, litert): every module in the
package whose name does not start with '_', in name order. A new family's module is found by being there; no
concern keeps a list of families by hand."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Iterable, List


def family_modules(package: str, path: Iterable[str]) -> List[ModuleType]:
    """Imports and returns the family modules of `package` (its ``__name__``), found on `path` (its ``__path__``)."""
    names = sorted(m.name for m in pkgutil.iter_modules(list(path)) if not m.name.startswith("_"))
    return [importlib.import_module(f"{package}.{name}") for name in names]
