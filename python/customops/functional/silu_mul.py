"""customops.silu_mul."""

from __future__ import annotations

import torch
from torch import Tensor

from ._common import _overview

__all__ = ["silu_mul"]


@_overview("`silu(a) * b` (SwiGLU's gate) in one pass, forward and backward",
           layouts=("any dense layout, native", "native", "a's"))
def silu_mul(a: Tensor, b: Tensor) -> Tensor:
    r"""SwiGLU's gated activation: ``y = silu(a) * b = a * sigmoid(a) * b``.

    One pass over memory on CPU (vectorised) and CUDA, forward and backward (both
    gradients from one read of ``grad``, ``a`` and ``b``), in place of the three
    kernels of ``F.silu(a) * b`` and the five of its backward.

    Args:
        a: the gate; float16, bfloat16, float32 or float64, on CPU or CUDA.
        b: the value; ``a``'s shape, dtype and device (no broadcasting). Under
            ``torch.autocast`` inputs of two dtypes run in the wider one, as
            ``a * b`` does. Half-precision inputs are computed in float32.

    Returns:
        A tensor like ``a``; a dense ``a`` (contiguous, channels_last,
        transposed) keeps its memory layout. Differentiable, twice.

    Example::

        >>> import torch, customops
        >>> a, b = torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([2.0, 3.0, 0.5])
        >>> customops.silu_mul(a, b)
        tensor([-0.5379,  0.0000,  0.8808])
    """
    return torch.ops.customops.silu_mul(a, b)
