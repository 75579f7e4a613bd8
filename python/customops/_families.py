"""The family modules of a per-concern package (func, sharding, onnx, inductor, litert, pointwise, functional,
modules): every module in the package whose name does not start with '_', in name order. A new family's module is
found by being there; no concern keeps a list of families by hand.

A concern whose package has a ``_pointwise`` module with a ``family(formulas)`` function also serves every
pointwise family (a module of customops.pointwise) that has no module of its own there: ``family`` makes one
from the family's formulas, so a pointwise op needs no file in that concern."""

from __future__ import annotations

import importlib
import importlib.util
import linecache
import pkgutil
import sys
from types import ModuleType
from typing import Dict, Iterable, List


def short_name(module: ModuleType) -> str:
    return module.__name__.rpartition(".")[2]


def family_modules(package: str, path: Iterable[str]) -> List[ModuleType]:
    """Imports and returns the family modules of `package` (its ``__name__``), found on `path` (its ``__path__``),
    with those its ``_pointwise.family`` makes, in name order."""
    names = sorted(m.name for m in pkgutil.iter_modules(list(path)) if not m.name.startswith("_"))
    modules = [importlib.import_module(f"{package}.{name}") for name in names]
    if importlib.util.find_spec(f"{package}._pointwise") is not None:
        maker = getattr(importlib.import_module(f"{package}._pointwise"), "family", None)
        if maker is not None:
            from . import pointwise

            # Made once: a second call (the docs build's) gets the same modules, registered nothing twice.
            modules += [sys.modules.get(f"{package}.{short_name(formulas)}") or maker(formulas)
                        for formulas in pointwise.families() if short_name(formulas) not in names]
    return sorted(modules, key=short_name)


def synthesized(package: str, formulas: ModuleType, **attributes) -> ModuleType:
    """A family module of `package` for the family of `formulas` (a pointwise family's formulas, or the family's
    module in another concern), holding `attributes`."""
    name = f"{package}.{short_name(formulas)}"
    module = ModuleType(name, f"Made from {formulas.__name__} (customops._families).")
    module.__dict__.update(attributes)
    # Importable like a family's own module (pickle finds a class by its module's name, docs tools its source).
    sys.modules[name] = module
    return module


def function_from_source(source: str, name: str, scope: dict, where: str):
    """The function (or class) `name` that `source` defines, with `scope` as its globals. Its text is kept where inspect finds
    it (linecache, under the file name "<customops: where>"), since tools that read a function's source (onnxscript,
    TorchScript) take such functions too."""
    filename = f"<customops: {where}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), scope)
    return scope[name]


def exported(families: Iterable[ModuleType]) -> Dict[str, object]:
    """Name -> object for every name the family modules list in their ``__all__``, in family order: what a package
    whose families hold public functions or classes (functional, modules) exports."""
    return {name: getattr(family, name) for family in families for name in family.__all__}
