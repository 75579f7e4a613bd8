"""ONNX export of the customops operators, to standard ONNX (default domain,
opset 18 or later).

After ``import customops``, ``torch.onnx.export(model, args, dynamo=True)``
translates every customops operator in ``model`` without further arguments.
Each family's module here holds its ops' translations (``TRANSLATIONS``) and
their rows of the table of translations on the docs' deployment page
(docs/deploy.md, ``DOC_ROWS``).

The translations are registered with onnxscript's torch_lib registry (where
the exporter also finds torchvision's ops) when that registry is first
imported, so ``import customops`` does not import onnxscript. For explicit
use, :func:`translation_table` gives them as a ``custom_translation_table``.

Needs onnx and onnxscript (and onnxruntime to run the result):
``pip install 'customops[onnx]'``.
"""

from __future__ import annotations

import sys

from . import _hook
from ._target import tflite_friendly

__all__ = ["INSTALL_HINT", "MIN_OPSET", "is_registered", "register", "tflite_friendly", "translation_table"]

MIN_OPSET = 18
INSTALL_HINT = "pip install 'customops[onnx]'  (onnx, onnxscript and onnxruntime)"


def _load():
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise ImportError(f"customops.onnx needs {e.name}, which is not installed: {INSTALL_HINT}") from e
    from . import _registration as registration

    return registration


def translation_table() -> dict:
    """``{torch.ops.customops.<op>.<overload>: translation}`` for every forward op's overloads,
    for ``torch.onnx.export(..., dynamo=True, custom_translation_table=...)``
    (not needed for a plain export, which finds them by itself)."""
    return _load().translation_table()


def register() -> None:
    """Registers the translations with the exporter's default registry now.
    Normally automatic; calling it again does nothing."""
    _load().register()


def is_registered() -> bool:
    """Whether a plain torch.onnx.export finds the translations. False before
    onnxscript's torch_lib registry has been imported (it registers then), or
    if registering failed (``_hook.error`` says why; it is logged too)."""
    if _hook.TORCHLIB_REGISTRATION not in sys.modules:
        return False
    return _load().is_registered()
