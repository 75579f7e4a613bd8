"""Registers the translations when onnxscript's torch_lib registry is first
imported, so that ``import customops`` need not import onnxscript.

Importing onnxscript (and onnx) costs about 0.3 s, a fifth of importing torch,
and most users of customops never export to ONNX. torch.onnx.export imports
the registry module itself before it reads it, so registering right after that
module has run is early enough for every export, and costs nothing otherwise.
customops._import_hook runs the registration right after that module loads, or
at once if it is already imported. Nothing here imports onnxscript.
"""

from __future__ import annotations

import logging
from typing import Optional

from .._import_hook import when_imported

_log = logging.getLogger("customops.onnx")

# The module of onnxscript's torch_lib registry (customops.onnx._registration says why there).
TORCHLIB_REGISTRATION = "onnxscript.function_libs.torch_lib.registration"

# Set when the automatic registration failed (an onnxscript it does not work with).
error: Optional[BaseException] = None


def _register(_module=None) -> None:
    global error
    try:
        from . import _registration

        _registration.register()
        error = None
    except Exception as e:  # an import of onnxscript must not fail because of customops
        error = e
        _log.warning("customops.onnx: could not register the ONNX translations with onnxscript's torch_lib "
                     "registry (%s: %s); pass customops.onnx.translation_table() to torch.onnx.export's "
                     "custom_translation_table instead", type(e).__name__, e)


def install(module_name: str = TORCHLIB_REGISTRATION) -> None:
    """Registers now if ``module_name`` is imported, else once it is."""
    when_imported(module_name, _register)
