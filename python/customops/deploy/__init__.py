"""Deployment checks for models with customops layers.

:func:`check` exports a model to ONNX, runs it in ONNX Runtime and reports,
per customops op and per output, the largest difference from eager PyTorch,
and flags layers whose exported semantics differ from PyTorch's or will on
common runtimes (resize coordinate modes that converters map differently,
half_pixel resizes to size 1, F.interpolate left in the model, im2col that
became a large Gather). ``python -m customops.deploy.check MODEL_OR_FILE``
prints the same report. Needs ``pip install 'customops[onnx]'``. With
``runtime="executorch"`` and ``calls=[...]``, a model with state (buffers its
forward updates, a decoding cache) is checked over a sequence of calls.
"""

from ._parity import check
from .report import Flag, OpParity, ParityReport

__all__ = ["Flag", "OpParity", "ParityReport", "check"]
