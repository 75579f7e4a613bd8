"""Runs code right after a given module is first imported, without importing it.

customops hooks into optional parts of the ecosystem (onnxscript's torch_lib registry for ONNX export,
Inductor's decomposition table for torch.compile) that most programs never load and that cost a noticeable
share of ``import torch`` to import. A post-import hook on ``sys.meta_path``, Python's standard way to run
code after a module loads, lets ``import customops`` stay cheap and still be in place before either is read.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


class _RunAfterLoad(importlib.abc.Loader):
    """Delegates to the module's own loader, then calls ``callback(module)``."""

    def __init__(self, loader, callback: Callable) -> None:
        self._loader, self._callback = loader, callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._callback(module)

    def __getattr__(self, name):  # get_source, get_filename, ... for inspect and linecache
        return getattr(self._loader, name)


class _PostImportHook(importlib.abc.MetaPathFinder):
    def __init__(self, module_name: str, callback: Callable) -> None:
        self.module_name, self.callback = module_name, callback
        self._searching = False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module_name or self._searching:
            return None
        self._searching = True  # find_spec below asks the finders again, this one included
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _RunAfterLoad(spec.loader, self._loaded)
        return spec

    def _loaded(self, module) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        self.callback(module)


def when_imported(module_name: str, callback: Callable) -> None:
    """Calls ``callback(module)`` now if ``module_name`` is imported, else right after its first import."""
    if module_name in sys.modules:
        callback(sys.modules[module_name])
    elif not any(isinstance(f, _PostImportHook) and f.module_name == module_name and f.callback is callback
                 for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportHook(module_name, callback))
