"""customops.QuickGELU."""

from __future__ import annotations

from torch import Tensor, nn

from .. import functional as F

__all__ = ["QuickGELU"]


class QuickGELU(nn.Module):
    # scaffold: its docstring, which names the function first | """:func:`customops.quick_gelu` as a module: TODO."""
    r"""Applies :func:`customops.quick_gelu` elementwise: ``x * sigmoid(1.702 * x)``.

    A drop-in for ``nn.GELU()`` in models trained with the sigmoid approximation
    (CLIP's ``QuickGELU``).

    Shape:
        Input: any shape. Output: same shape as the input.

    Example::

        >>> m = customops.QuickGELU()
        >>> y = m(torch.randn(2, 3))
    """
    # scaffold-end

    def forward(self, x: Tensor) -> Tensor:
        return F.quick_gelu(x)
