"""customops.UpsampleBilinear2d (nn.Upsample's arguments)."""

from __future__ import annotations

from typing import List, Optional

from torch import Tensor, nn
from torch.nn.modules.utils import _pair

from .. import functional as F

__all__ = ["UpsampleBilinear2d"]


class UpsampleBilinear2d(nn.Module):
    r""":func:`customops.upsample_bilinear2d` as a module: like ``nn.Upsample(mode="bilinear")``
    with a ``coordinate_mode`` (``"half_pixel"``, ``"align_corners"`` or ``"asymmetric"``)
    in place of ``align_corners``; ``scale_factor`` and ``recompute_scale_factor``
    as :func:`customops.upsample_bilinear2d` reads them (as ``nn.Upsample``).

    Example::

        >>> up = customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode="asymmetric")
        >>> y = up(torch.randn(1, 3, 8, 8))  # (1, 3, 16, 16), as TF1 resize_bilinear
    """

    def __init__(self, size=None, scale_factor=None, coordinate_mode: str = "half_pixel",
                 recompute_scale_factor: Optional[bool] = None) -> None:
        super().__init__()
        if (size is None) == (scale_factor is None):
            raise ValueError("UpsampleBilinear2d: give exactly one of size and scale_factor")
        self.size: Optional[List[int]] = None if size is None else [int(s) for s in _pair(size)]
        self.scale_factor: Optional[List[float]] = (
            None if scale_factor is None else [float(s) for s in _pair(scale_factor)])
        self.coordinate_mode = coordinate_mode
        self.recompute_scale_factor: Optional[bool] = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.upsample_bilinear2d(input, self.size, self.coordinate_mode, self.scale_factor,
                                     recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, coordinate_mode={self.coordinate_mode!r}"
