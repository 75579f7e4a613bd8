# scaffold: the translation in a paragraph | """trilinear_interpolation -> TODO(trilinear_interpolation)."""
"""trilinear_interpolation -> the 8 corner weights of each point and their
weighted sum of the corner features (a batched MatMul).

With t = (points + 1) / 2 per axis, corner k (bits (x, y, z) = (k>>2 & 1,
k>>1 & 1, k & 1)) has weight prod over axes of (bit ? t : 1 - t). The factors
[1 - tx, 1 - ty, 1 - tz, tx, ty, tz] form an (N, 6) matrix; three Gathers of
its columns in corner order, multiplied, give the (N, 8) weights. Every
intermediate is 2-D: converters such as onnx2tf take 4-D values for images
and permute their axes, which an (N, 2, 2, 2) outer product would suffer.
"""
# scaffold-end

from __future__ import annotations

from ._common import TFloat, TOtherFloat, compute_dtype, ints, op, scalar, to_compute

# scaffold: what the translation shares |
# Per corner k = x*4 + y*2 + z, the column of [1 - t, t] (N, 6) holding its factor along each axis.
_COLUMNS = [[(k >> (2 - axis) & 1) * 3 + axis for k in range(8)] for axis in range(3)]
# scaffold-end


def trilinear_interpolation(feats: TFloat, points: TOtherFloat) -> TFloat:
    # scaffold: the translation (onnxscript) | raise NotImplementedError("TODO(trilinear_interpolation)")
    # As the kernels: computed in feats' compute dtype (float for half types),
    # whatever the points' dtype; the result has feats' dtype.
    dtype = compute_dtype(feats)
    t = op.Mul(op.Add(to_compute(points, dtype), scalar(1.0, dtype)), scalar(0.5, dtype))  # (N, 3)
    factors = op.Concat(op.Sub(scalar(1.0, dtype), t), t, axis=1)  # (N, 6)
    fx, fy, fz = (op.Gather(factors, ints(columns), axis=1) for columns in _COLUMNS)  # (N, 8) each
    weights = op.Unsqueeze(op.Mul(op.Mul(fx, fy), fz), ints([1]))  # (N, 1, 8)
    out = op.MatMul(weights, to_compute(feats, dtype))  # (N, 1, F)
    return to_compute(op.Squeeze(out, ints([1])), feats.dtype)
    # scaffold-end


TRANSLATIONS = {"trilinear_interpolation": trilinear_interpolation}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
DOC_ROWS = [
    (
        # scaffold: its row in the ONNX table: the op, its translation | "TODO(trilinear_interpolation)", "TODO(trilinear_interpolation)",
        "`trilinear_interpolation`",
        "the 8 corner weights (`Add`, `Mul`, `Sub`) and their weighted sum (`MatMul`)",
        # scaffold-end
    ),
]
