"""customops.trilinear_interpolation."""

from __future__ import annotations

import torch
from torch import Tensor

from ._common import _overview

__all__ = ["trilinear_interpolation"]


# scaffold: its lines in the docs' tables | @_overview("TODO(trilinear_interpolation)", layouts=("TODO(trilinear_interpolation): NCHW", "TODO(trilinear_interpolation): channels_last", "TODO(trilinear_interpolation): the result's format"))
@_overview("NeRF-style: feats `(N, 8, F)`, points `(N, 3)` in `[-1, 1]` → `(N, F)`; gradients for feats and "
           "points, which may have different dtypes",
           layouts=("— (`(N, 8, F)`, `(N, 3)`)",
                    "—",
                    "contiguous"))
# scaffold-end
def trilinear_interpolation(feats: Tensor, points: Tensor) -> Tensor:
    # scaffold: what it computes, its arguments and result: its API page | """TODO(trilinear_interpolation): its API page."""
    r"""NeRF-style trilinear interpolation of each point's 8 cube-corner features.

    With ``u, v, w = (points + 1) / 2`` per point,
    ``out = (1-u)(a f0 + b f1 + c f2 + d f3) + u(a f4 + b f5 + c f6 + d f7)``,
    ``a = (1-v)(1-w), b = (1-v)w, c = v(1-w), d = vw``: corner ``k`` has bits
    ``(x, y, z) = (k>>2 & 1, k>>1 & 1, k & 1)``. Points outside ``[-1, 1]`` follow
    the same formula, i.e. they extrapolate linearly along each axis (no clamping).

    Args:
        feats: ``(N, 8, F)``; float16, bfloat16, float32 or float64, on CPU or CUDA.
        points: ``(N, 3)`` local coordinates on feats' device, of any of those
            dtypes (it need not be feats'), e.g. float32 points with bfloat16
            feats under ``torch.autocast``.

    Returns:
        ``(N, F)`` of feats' dtype, contiguous: feats are the values being
        interpolated and the bulk of the memory traffic. Computed in feats'
        dtype, float32 for half types (so float64 points with float32 feats
        compute in float32); the points are read at their own precision,
        never rounded to a half type, since a half coordinate in ``[-1, 1]``
        keeps only about 3 digits. Differentiable (twice) in feats and in
        points; the gradients have the dtype of their input, so they reach
        float32 parameters as float32. The points' gradient is what pose and
        grid refinement need.
    """
    # scaffold-end
    return torch.ops.customops.trilinear_interpolation(feats, points)
