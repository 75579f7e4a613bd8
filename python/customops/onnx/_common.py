"""What the family modules of customops.onnx share: the ONNX opset the
translations emit, tensor types for their signatures, and shape helpers.

A translation is a plain Python function of onnxscript values, traced when the
exporter reaches the op (trace_only in onnxscript's terms): the nodes it calls
go straight into the exported graph, in the default ONNX domain, and Python
logic on the op's non-tensor arguments (kernel sizes, modes) runs at export
time. The exporter reads each parameter's annotation to tell tensor inputs
(onnxscript tensor types) from attributes (int, str, Sequence[int]), so every
parameter is annotated, and keeps the schema's name and default: the exporter
drops trailing arguments that equal their defaults.
"""

from __future__ import annotations

from typing import Optional, Sequence, TypeVar, Union

import numpy as np
from onnxscript import BFLOAT16, DOUBLE, FLOAT, FLOAT16, INT64
from onnxscript import ir
# Opset 18 is Col2Im's first and the oldest the task targets; the model declares the exporter's opset
# (newer), in which the ops used here have not changed.
from onnxscript.onnx_opset import opset18 as op

from ._target import for_tflite, tflite_friendly

__all__ = ["INT64", "TFloat", "TOtherFloat", "batched", "compute_dtype", "for_tflite", "int64_vector", "ints", "op",
           "pair", "rank", "scalar", "static_dim", "tflite_friendly", "to_compute", "unbatched"]

TFloat = TypeVar("TFloat", bound=Union[FLOAT16, FLOAT, DOUBLE, BFLOAT16])
# A second floating type, free of TFloat: for an input whose dtype may differ from the first's.
TOtherFloat = TypeVar("TOtherFloat", bound=Union[FLOAT16, FLOAT, DOUBLE, BFLOAT16])

_HALF = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)

def static_dim(x, axis: int) -> Optional[int]:
    """x's size along ``axis`` when the exporter knows it as a number, else None
    (a symbolic size, such as a dynamic batch)."""
    shape = x.shape
    if shape is None:
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def rank(x) -> int:
    if x.shape is None:
        raise ValueError(f"customops.onnx: the rank of {x.name!r} is unknown at export time")
    return len(x.shape)


def batched(x, expected_rank: int):
    """(x with a batch dimension, whether one was added): the ops also take
    unbatched inputs, which ONNX's Conv, Pad and Col2Im do not."""
    if rank(x) == expected_rank - 1:
        return op.Unsqueeze(x, op.Constant(value_ints=[0])), True
    return x, False


def unbatched(y, added: bool):
    return op.Squeeze(y, op.Constant(value_ints=[0])) if added else y


def ints(values: Sequence[int]):
    return op.Constant(value_ints=[int(v) for v in values])


def scalar(value: float, dtype: ir.DataType):
    """A constant of ``dtype``, so that no Cast or type promotion depends on the exporter."""
    return op.Constant(value=ir.tensor(np.array(value, dtype=dtype.numpy())))


def int64_vector(values):
    """A 1-D INT64 value of ``values``: a value already, a list of ints (a
    constant), or a list mixing ints and 0-D values (sizes that are symbolic
    under dynamic shapes)."""
    if isinstance(values, ir.Value):
        return values
    values = list(values)
    if all(isinstance(v, int) for v in values):
        return ints(values)
    pieces = [ints([v]) if isinstance(v, int) else op.Reshape(op.Cast(v, to=ir.DataType.INT64), ints([1]))
              for v in values]
    return op.Concat(*pieces, axis=0)


def compute_dtype(x) -> ir.DataType:
    """The dtype the kernels compute x's dtype in: float for the half types
    (their opmath type), the dtype itself otherwise."""
    return ir.DataType.FLOAT if x.dtype in _HALF else x.dtype


def to_compute(x, dtype: ir.DataType):
    return x if x.dtype == dtype else op.Cast(x, to=dtype)


def pair(v: Union[int, Sequence[int]], name: str) -> list[int]:
    """(height, width) of an int[2] argument, which the schema may hand on as one int."""
    if isinstance(v, int):
        return [v, v]
    values = [int(e) for e in v]
    if len(values) == 1:
        return values * 2
    if len(values) != 2:
        raise ValueError(f"customops.onnx: expected {name} to have 2 values, got {values}")
    return values
