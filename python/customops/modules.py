"""nn.Module wrappers of the functional API (scriptable and exportable)."""

from __future__ import annotations

import math
from typing import List, Optional

import torch
from torch import Tensor, nn
from torch.nn.modules.utils import _pair

from . import functional as F


class QuickGELU(nn.Module):
    r"""Applies :func:`customops.quick_gelu` elementwise: ``x * sigmoid(1.702 * x)``.

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


class Im2col(nn.Module):
    """:func:`customops.im2col` as a module; the same arguments as ``nn.Unfold``."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size, self.dilation = list(_pair(kernel_size)), list(_pair(dilation))
        self.padding, self.stride = list(_pair(padding)), list(_pair(stride))

    def forward(self, input: Tensor) -> Tensor:
        return F.im2col(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, stride={self.stride}"


class Col2im(nn.Module):
    """:func:`customops.col2im` as a module; the same arguments as ``nn.Fold``."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = list(_pair(output_size)), list(_pair(kernel_size))
        self.dilation, self.padding, self.stride = list(_pair(dilation)), list(_pair(padding)), list(_pair(stride))

    def forward(self, input: Tensor) -> Tensor:
        return F.col2im(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


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
            pads = F._padding_sides(self.padding, self.kernel_size, self.stride, self.dilation)
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


class TrilinearInterpolation(nn.Module):
    """:func:`customops.trilinear_interpolation` as a module: ``forward(feats, points)``."""

    def forward(self, feats: Tensor, points: Tensor) -> Tensor:
        return F.trilinear_interpolation(feats, points)
