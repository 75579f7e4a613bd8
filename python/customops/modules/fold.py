"""customops.Im2col and customops.Col2im (nn.Unfold's and nn.Fold's arguments)."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.modules.utils import _pair

from .. import functional as F

__all__ = ["Im2col", "Col2im"]


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
