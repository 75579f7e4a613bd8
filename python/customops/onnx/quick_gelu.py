# scaffold: the translation in a line | """quick_gelu -> TODO."""
"""quick_gelu -> x * Sigmoid(1.702 x)."""
# scaffold-end

from __future__ import annotations

from ._common import TFloat, compute_dtype, op, scalar, to_compute


def quick_gelu(x: TFloat) -> TFloat:
    # scaffold: the ONNX nodes, in the compute dtype | raise NotImplementedError("TODO(quick_gelu)")
    # The kernels compute half types in float; so does the graph, for the same
    # values rather than a float16 sigmoid.
    dtype = compute_dtype(x)
    xc = to_compute(x, dtype)
    y = op.Mul(xc, op.Sigmoid(op.Mul(xc, scalar(1.702, dtype))))
    return to_compute(y, x.dtype)
    # scaffold-end


TRANSLATIONS = {"quick_gelu": quick_gelu}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
# scaffold: its rows of the docs' table | DOC_ROWS = [("`quick_gelu`", "TODO")]
DOC_ROWS = [
    (
        "`quick_gelu`",
        "`x * Sigmoid(1.702 * x)`",
    ),
]
# scaffold-end
