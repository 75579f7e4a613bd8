"""nn.Module wrappers of the functional API (scriptable and exportable)."""

from __future__ import annotations

from torch import Tensor, nn

from . import functional as F


class QuickGELU(nn.Module):
    r"""Applies :func:`customops.quick_gelu` elementwise: :math:`x \cdot \sigma(1.702\,x)`.

    A drop-in for ``nn.GELU()`` in models trained with the sigmoid approximation
    (CLIP's ``QuickGELU``).

    Shape:
        Input: any shape. Output: same shape as the input.

    Example::

        >>> m = customops.QuickGELU()
        >>> y = m(torch.randn(2, 3))
    """

    def forward(self, x: Tensor) -> Tensor:
        return F.quick_gelu(x)
