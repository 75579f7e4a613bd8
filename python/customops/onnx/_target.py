"""Which converters an export is for: a context that the translations read while the exporter traces them.
Nothing here imports onnxscript, so that customops.onnx.tflite_friendly costs nothing to import."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_TFLITE = contextvars.ContextVar("customops_onnx_tflite", default=False)


@contextlib.contextmanager
def tflite_friendly() -> Iterator[None]:
    """Exports inside this block use translations that ONNX -> TF-Lite converters map exactly, where the
    default ones get mis-laid: onnx2tf takes every 4-D value for an NCHW image and makes it NHWC, which
    breaks im2col's Gathers of (N, C, kh, oh, ...) values; im2col becomes a depthwise Conv with one-hot
    filters instead (every tap's product is x * 1 plus zeros: exact for finite inputs)."""
    token = _TFLITE.set(True)
    try:
        yield
    finally:
        _TFLITE.reset(token)


def for_tflite() -> bool:
    return _TFLITE.get()
