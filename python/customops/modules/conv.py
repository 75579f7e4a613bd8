"""customops.Conv2d and customops.DepthwiseConv2d (nn.Conv2d's parameters and arguments)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn.modules.utils import _pair

from ..functional.conv import _padding_sides

__all__ = ["Conv2d", "DepthwiseConv2d"]


class _Conv(nn.Module):
    """Parameters, initialisation and padding of nn.Conv2d, for our convolutions.

    Not an nn.Conv2d subclass on purpose: tools that find nn.Conv2d modules
    (fusers, quantisers) would swap in their own convolution.
    """


    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding, dilation, groups: int,
                 bias: bool, padding_mode: str, device, dtype) -> None:
        super().__init__()
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"groups ({groups}) must be positive and divide in_channels ({in_channels}) "
                             f"and out_channels ({out_channels})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = list(_pair(kernel_size)), list(_pair(stride))
        self.dilation, self.padding_mode = list(_pair(dilation)), padding_mode
        self.padding = padding if isinstance(padding, str) else list(_pair(padding))
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty((out_channels, in_channels // groups, *self.kernel_size), **factory))
        self.bias = nn.Parameter(torch.empty(out_channels, **factory)) if bias else None
        self._set_padding()
        self.reset_parameters()

    def _set_padding(self) -> None:
        # Per dimension (before, after), read as customops.conv2d (and F.conv2d) read padding.
        if isinstance(self.padding, str) and self.padding not in ("valid", "same"):
            raise ValueError(f"padding must be 'valid', 'same', an int or a pair, got {self.padding!r}")
        try:
            pads = _padding_sides(self.padding, self.kernel_size, self.stride, self.dilation)
        except RuntimeError as e:  # nn.Conv2d raises ValueError where F.conv2d raises RuntimeError
            raise ValueError(str(e)) from None
        (top, bottom), (left, right) = pads
        if self.padding_mode == "zeros":
            # The op pads symmetrically; 'same' with an even extent needs one more after.
            self._conv_padding = [top, left]
            self._pre_pad = [0, right - left, 0, bottom - top]
            self._pre_pad_mode = "constant"
        else:
            self._conv_padding = [0, 0]
            self._pre_pad = [left, right, top, bottom]
            self._pre_pad_mode = self.padding_mode
        self._needs_pre_pad = any(p != 0 for p in self._pre_pad)

    def reset_parameters(self) -> None:
        # nn.Conv2d's default: kaiming_uniform_(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * self.weight.shape[2] * self.weight.shape[3]
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    # forward calls the op itself, not the functional wrapper: the constructor checked and normalised the window
    # (stride, symmetric padding, dilation), and the op checks the tensors; the wrapper's argument checks would cost
    # every call microseconds of host time that an eager training step, often host-bound, pays per layer.
    def _pad(self, input: Tensor) -> Tensor:
        if self._needs_pre_pad:
            return torch.nn.functional.pad(input, self._pre_pad, mode=self._pre_pad_mode)
        return input

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
             f"padding={self.padding}, dilation={self.dilation}")
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_Conv):
    """:func:`customops.conv2d` as a layer: the constructor arguments, parameter
    shapes and default initialisation of ``torch.nn.Conv2d`` (``padding`` may also
    be ``'same'`` or ``'valid'``; every ``padding_mode``)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return torch.ops.customops.conv2d(self._pad(input), self.weight, self.bias, self.stride, self._conv_padding,
                                          self.dilation, self.groups)


class DepthwiseConv2d(_Conv):
    """:func:`customops.depthwise_conv2d` as a layer: ``torch.nn.Conv2d``'s
    arguments with ``groups = in_channels``; ``out_channels`` must be a multiple
    of ``in_channels`` (the channel multiplier)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        if in_channels <= 0 or out_channels % in_channels:
            raise ValueError(f"out_channels ({out_channels}) must be a multiple of in_channels ({in_channels})")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, in_channels, bias,
                         padding_mode, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return torch.ops.customops.depthwise_conv2d(self._pad(input), self.weight, self.bias, self.stride,
                                                    self._conv_padding, self.dilation)
