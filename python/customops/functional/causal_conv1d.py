"""customops.causal_conv1d."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ._common import _overview

__all__ = ["causal_conv1d"]


@_overview("Mamba's short convolution: `(B, C, L)` with a `(C, K)` filter per channel, each step from itself and "
           "the `K-1` before it (`K` up to 8); one pass each way, deterministic weight gradient",
           layouts=("— (`(B, C, L)`; any strides, e.g. a transposed `(B, L, C)`)",
                    "—",
                    "contiguous"))
def causal_conv1d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    r"""The depthwise causal 1-D convolution of sequence models (Mamba's, H3's,
    GLA's short convolutions).

    ``y[b, c, t] = bias[c] + sum_k weight[c, k] * x[b, c, t - (K-1) + k]``, with
    ``x`` read as 0 before ``t = 0``: each step sees itself and the ``K - 1``
    steps before it, never a later one. The same as
    ``F.conv1d(x, weight.unsqueeze(1), bias, padding=K - 1, groups=C)[..., :L]``
    without the padded steps it computes and drops.

    Args:
        x: ``(B, C, L)``; float16, bfloat16, float32 or float64, on CPU or CUDA,
            of any strides (Mamba's ``(B, L, C)`` activations transposed to
            ``(B, C, L)`` are read once into a contiguous copy).
        weight: ``(C, K)`` with ``1 <= K <= 8``, or ``(C, 1, K)`` as
            ``nn.Conv1d(C, C, K, groups=C)`` holds it; ``x``'s dtype and device.
        bias: ``(C,)`` or None.

    Returns:
        ``(B, C, L)``, contiguous, of ``x``'s dtype, computed in float32 for half
        types. Differentiable (twice) in ``x``, ``weight`` and ``bias``; the
        weight and bias gradients are sums over batch and time in a fixed order
        (the same bits every run). Under ``torch.autocast`` it runs in the
        autocast dtype, as ``F.conv1d`` does.

    Example::

        >>> import torch, customops
        >>> x = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]])
        >>> customops.causal_conv1d(x, torch.tensor([[0.5, 1.0]]))
        tensor([[[1.0000, 2.5000, 4.0000, 5.5000]]])
    """
    if isinstance(weight, Tensor) and weight.dim() == 3 and weight.size(1) == 1:
        weight = weight.squeeze(1)
    return torch.ops.customops.causal_conv1d(x, weight, bias)
