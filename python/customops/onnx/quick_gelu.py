"""quick_gelu -> x * Sigmoid(1.702 x)."""

from __future__ import annotations

from ._common import TFloat, compute_dtype, op, scalar, to_compute


def quick_gelu(x: TFloat) -> TFloat:
    # The kernels compute half types in float; so does the graph, for the same
    # values rather than a float16 sigmoid.
    dtype = compute_dtype(x)
    xc = to_compute(x, dtype)
    y = op.Mul(xc, op.Sigmoid(op.Mul(xc, scalar(1.702, dtype))))
    return to_compute(y, x.dtype)


TRANSLATIONS = {"quick_gelu": quick_gelu}
