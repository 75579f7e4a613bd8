# scaffold: the decompositions in a paragraph | """trilinear_interpolation's decompositions: TODO(trilinear_interpolation)."""
"""trilinear_interpolation's decompositions: kernels/trilinear.h's corner weights and their derivatives,
the blends as reductions over the 8 corners (and, for the points' gradient, over the features), all in
opmath of feats' dtype as the kernels compute."""
# scaffold-end

from __future__ import annotations

import torch

from ._common import opmath

OP = "trilinear_interpolation"
# scaffold: the compiled-graph choice (measured: docs/design/adding_an_operator.md) | DECOMPOSED_BY_DEFAULT = "TODO(trilinear_interpolation): True (decomposed) or False (kept whole), as measured"
DECOMPOSED_BY_DEFAULT = True
# scaffold-end


# scaffold: what the decompositions share |
def _factors(points: torch.Tensor, dtype: torch.dtype):
    """(N, 3) factors t = (coordinate + 1) / 2 and 1 - t."""
    t = (points.to(dtype) + 1) * 0.5
    return t, 1 - t


def _corner(k: int, d: int, t: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Factor of corner k along axis d: t if the corner's bit for d is set, else 1 - t."""
    return t[:, d] if (k >> (2 - d)) & 1 else s[:, d]


def _weights(t: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return torch.stack([_corner(k, 0, t, s) * _corner(k, 1, t, s) * _corner(k, 2, t, s) for k in range(8)], 1)
# scaffold-end


def trilinear_interpolation(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    # scaffold: the forward in ATen operations | raise NotImplementedError("TODO(trilinear_interpolation)")
    compute = opmath(feats.dtype)
    w = _weights(*_factors(points, compute))
    return (w[:, :, None] * feats.to(compute)).sum(1).to(feats.dtype)
    # scaffold-end


def trilinear_interpolation_backward(grad_out: torch.Tensor, feats: torch.Tensor, points: torch.Tensor,
                                     output_mask):
    # scaffold: the backward in ATen operations | raise NotImplementedError("TODO(trilinear_interpolation)")
    compute = opmath(feats.dtype)
    t, s = _factors(points, compute)
    g = grad_out.to(compute)
    grad_feats = grad_points = None
    if output_mask[0]:
        grad_feats = (_weights(t, s)[:, :, None] * g[:, None, :]).to(feats.dtype)
    if output_mask[1]:
        gf = (feats.to(compute) * g[:, None, :]).sum(2)  # (N, 8): each corner's feature against grad_out
        columns = []
        for d in range(3):
            # d weight(k) / d coordinate d = +-1/2 times the corner's other two factors.
            terms = [(0.5 if (k >> (2 - d)) & 1 else -0.5) * _corner(k, (d + 1) % 3, t, s)
                     * _corner(k, (d + 2) % 3, t, s) * gf[:, k] for k in range(8)]
            columns.append(torch.stack(terms, 1).sum(1))
        grad_points = torch.stack(columns, 1).to(points.dtype)
    return grad_feats, grad_points
    # scaffold-end


DECOMPOSITIONS = {"trilinear_interpolation": trilinear_interpolation,
                  "trilinear_interpolation_backward": trilinear_interpolation_backward}


# This family's rows of the table in docs/design/compile.md, which the docs build reads from here (MyST
# Markdown): the op(s), what compiled graphs do with them, the measurement that made the choice, and why.
DOC_ROWS = [
    (
        # scaffold: its row in the compile table: the op(s), the choice, the measurement, why | "TODO(trilinear_interpolation)", "TODO(trilinear_interpolation)", "TODO(trilinear_interpolation)", "TODO(trilinear_interpolation)",
        "`trilinear_interpolation` (+ backward)",
        "decomposed",
        "NeRF field, 2^20 points x 32 features: 0.75 / 0.95",
        "the blend fuses with the corner gather before it and the MLP's input",
        # scaffold-end
    ),
]
