"""customops.TrilinearInterpolation."""

from __future__ import annotations

from torch import Tensor, nn

from .. import functional as F

__all__ = ["TrilinearInterpolation"]


class TrilinearInterpolation(nn.Module):
    """:func:`customops.trilinear_interpolation` as a module: ``forward(feats, points)``."""

    def forward(self, feats: Tensor, points: Tensor) -> Tensor:
        return F.trilinear_interpolation(feats, points)
