"""What ``python -m customops.deploy.check MODEL_OR_FILE`` checks.

MODEL_OR_FILE is either
- ``module:callable`` (``package.module:build`` importable from the current
  directory, or ``path/to/file.py:build``): ``build()`` returns ``(model,
  args)``, the model and a tuple of example inputs (or one tensor); or
- a ``.pt2`` file written by ``torch.export.save``: its exported program, run
  on the example inputs saved with it (``torch.export.export`` keeps them).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Tuple

import torch


def load(spec: str) -> Tuple[Any, tuple, dict]:
    """(model or exported program, args, kwargs) named by MODEL_OR_FILE."""
    if spec.endswith(".pt2"):
        if not Path(spec).is_file():
            raise FileNotFoundError(f"MODEL_OR_FILE: no file {spec!r}")
        program = torch.export.load(spec)
        if program.example_inputs is None:
            raise ValueError(f"MODEL_OR_FILE: {spec} has no example inputs; save a program made by "
                             "torch.export.export(model, args)")
        args, kwargs = program.example_inputs
        return program, tuple(args), dict(kwargs)
    if ":" not in spec:
        raise ValueError(f"MODEL_OR_FILE: expected 'module:callable', 'file.py:callable' or a .pt2 file, "
                         f"got {spec!r}")
    where, _, name = spec.rpartition(":")
    module = _import(where)
    try:
        build = getattr(module, name)
    except AttributeError:
        raise ValueError(f"MODEL_OR_FILE: {where} has no {name!r}") from None
    built = build()
    if not (isinstance(built, tuple) and len(built) == 2):
        raise TypeError(f"MODEL_OR_FILE: {spec}() must return (model, args), got {type(built).__name__}")
    model, args = built
    return model, args if isinstance(args, tuple) else (args,), {}


def _import(where: str):
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise FileNotFoundError(f"MODEL_OR_FILE: no file {where!r}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
        return module
    # As `python -m` does: modules of the current directory are importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(where)
