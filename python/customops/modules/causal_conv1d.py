"""customops.CausalConv1d."""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from ..functional.causal_conv1d import _channel_last

__all__ = ["CausalConv1d"]


class CausalConv1d(nn.Module):
    """:func:`customops.causal_conv1d` as a module: a ``(channels, kernel_size)``
    filter and a ``(channels,)`` bias, initialised as ``nn.Conv1d(channels,
    channels, kernel_size, groups=channels)`` initialises its own;
    ``forward(x)`` with ``x`` of shape ``(B, channels, L)`` (the result in
    ``x``'s layout where it is channel-last, else contiguous); ``activation``
    (None, ``"silu"`` or ``"swish"``) is fused into the call, as Mamba's
    ``causal_conv1d_fn(..., activation="silu")``."""

    def __init__(self, channels: int, kernel_size: int = 4, bias: bool = True,
                 device: Optional[torch.device] = None, dtype: Optional[torch.dtype] = None,
                 activation: Optional[str] = None) -> None:
        super().__init__()
        if not 1 <= kernel_size <= 8:
            raise ValueError(f"kernel_size must be between 1 and 8, got {kernel_size}")
        if activation not in (None, "silu", "swish"):
            raise ValueError(f"activation must be None, 'silu' or 'swish', got {activation!r}")
        self.activation = activation
        factory = {"device": device, "dtype": dtype}
        self.channels, self.kernel_size = channels, kernel_size
        self.weight = nn.Parameter(torch.empty(channels, kernel_size, **factory))
        self.bias = nn.Parameter(torch.empty(channels, **factory)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # nn.Conv1d's default: kaiming_uniform_(a=sqrt(5)) over fan_in = kernel_size, bias U(+-1/sqrt(fan_in)).
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.kernel_size)
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        # As the function: a channel-last x takes the overload that reads it in place (any keyword argument picks
        # it; written as calls of the op, which TorchScript compiles).
        if self.activation is None and not _channel_last(x):
            return torch.ops.customops.causal_conv1d(x, self.weight, self.bias)
        return torch.ops.customops.causal_conv1d(x, self.weight, self.bias, activation=self.activation)

    def extra_repr(self) -> str:
        act = "" if self.activation is None else f", activation={self.activation!r}"
        return f"{self.channels}, kernel_size={self.kernel_size}, bias={self.bias is not None}{act}"
