"""customops.SiluMul."""

from __future__ import annotations

from torch import Tensor, nn

from .. import functional as F

__all__ = ["SiluMul"]


class SiluMul(nn.Module):
    r"""Applies :func:`customops.silu_mul`: ``silu(a) * b``, the gate of a SwiGLU MLP
    (``w2(silu(w1(x)) * w3(x))``).

    Shape:
        a, b: any shape, the same. Output: that shape.

    Example::

        >>> m = customops.SiluMul()
        >>> y = m(torch.randn(2, 8), torch.randn(2, 8))
    """

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return F.silu_mul(a, b)
