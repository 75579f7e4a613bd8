"""trilinear_interpolation -> the 8 corner weights of each point and their
weighted sum of the corner features (a batched MatMul).

With t = (points + 1) / 2 per axis, corner k (bits (x, y, z) = (k>>2 & 1,
k>>1 & 1, k & 1)) has weight prod over axes of (bit ? t : 1 - t). Stacking
[1 - t, t] per axis and multiplying the three axes' factors as an outer product
(x, y, z) gives the weights in corner order x*4 + y*2 + z, which is k.
"""

from __future__ import annotations

from ._common import TFloat, TOtherFloat, compute_dtype, ints, op, scalar, to_compute


def trilinear_interpolation(feats: TFloat, points: TOtherFloat) -> TFloat:
    # As the kernels: computed in feats' compute dtype (float for half types),
    # whatever the points' dtype; the result has feats' dtype.
    dtype = compute_dtype(feats)
    t = op.Mul(op.Add(to_compute(points, dtype), scalar(1.0, dtype)), scalar(0.5, dtype))  # (N, 3)
    t = op.Unsqueeze(t, ints([2]))  # (N, 3, 1)
    factors = op.Concat(op.Sub(scalar(1.0, dtype), t), t, axis=2)  # (N, 3, 2): [1 - t, t] per axis
    fx, fy, fz = (op.Gather(factors, op.Constant(value_int=axis), axis=1) for axis in range(3))  # (N, 2) each
    weights = op.Mul(op.Mul(op.Unsqueeze(fx, ints([2, 3])), op.Unsqueeze(fy, ints([1, 3]))),
                     op.Unsqueeze(fz, ints([1, 2])))  # (N, 2, 2, 2)
    weights = op.Reshape(weights, ints([0, 1, 8]))  # (N, 1, 8); 0 copies N, also for N = 0
    out = op.MatMul(weights, to_compute(feats, dtype))  # (N, 1, F)
    return to_compute(op.Squeeze(out, ints([1])), feats.dtype)


TRANSLATIONS = {"trilinear_interpolation": trilinear_interpolation}
