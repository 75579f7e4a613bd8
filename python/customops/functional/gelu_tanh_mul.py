"""customops.gelu_tanh_mul."""

from __future__ import annotations

import torch
from torch import Tensor

from ._common import _overview

__all__ = ["gelu_tanh_mul"]


# Its line in the docs' operator table; a dense input of any layout keeps it (the shared kernels).
@_overview("`gelu(a, approximate=\"tanh\") * b` (GeGLU's gate) in one pass, forward and backward",
           layouts=("any dense layout, native", "native", "a's"))
def gelu_tanh_mul(a: Tensor, b: Tensor) -> Tensor:
    r"""GeGLU's gated activation with GELU's tanh approximation: ``y = gelu(a, approximate="tanh") * b``.

    One pass over memory on CPU (vectorised) and CUDA, forward and backward (both
    gradients from one read of ``grad``, ``a`` and ``b``), in place of the several
    kernels of ``F.gelu(a, approximate="tanh") * b`` and of its backward (Gemma's MLP).

    Args:
        a: float16, bfloat16, float32 or float64, on CPU or CUDA.
        b: ``a``'s shape, dtype and device (no broadcasting).
            Under ``torch.autocast`` inputs of several dtypes run in the widest, as ``a * b`` does.
            Half-precision inputs are computed in float32.

    Returns:
        A tensor like ``a``; a dense ``a`` (contiguous, channels_last,
        transposed) keeps its memory layout. Differentiable, twice.
    """
    return torch.ops.customops.gelu_tanh_mul(a, b)
