"""customops.im2col and customops.col2im."""

from __future__ import annotations

import torch
from torch import Tensor
from torch._jit_internal import BroadcastingList2

from ._common import _check_args, _int_pair, _overview

__all__ = ["im2col", "col2im"]


@_overview("sliding-window columns, same result and layout as `F.unfold`; batched `(N, C, H, W)` or unbatched "
           "`(C, H, W)`; its gradient is `col2im`",
           layouts=("native",
                    "read through strides",
                    "`(N, C·kh·kw, L)` columns, as `F.unfold`"))
def im2col(
    input: Tensor,
    kernel_size: BroadcastingList2[int],
    dilation: BroadcastingList2[int] = 1,
    padding: BroadcastingList2[int] = 0,
    stride: BroadcastingList2[int] = 1,
) -> Tensor:
    r"""Sliding-window columns of an image: the same result and layout as
    :func:`torch.nn.functional.unfold`.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; float16, bfloat16,
            float32 or float64, on CPU or CUDA. Any memory layout.
        kernel_size, dilation, padding, stride: an int or a pair ``(height, width)``;
            kernel_size, dilation and stride at least 1, padding at least 0.

    Returns:
        ``(N, C*kh*kw, L)`` (or ``(C*kh*kw, L)``), contiguous, where
        ``L = out_h * out_w`` and ``out_h = (H + 2*ph - dh*(kh-1) - 1) // sh + 1``.
        Rows are ordered ``(c, i, j)``, columns ``(oh, ow)``; padding reads as zero.
        Its gradient is :func:`col2im`.
    """
    if not torch.jit.is_scripting():
        _check_args("im2col", pairs=[("kernel_size", kernel_size), ("dilation", dilation), ("padding", padding),
                                     ("stride", stride)])
    return torch.ops.customops.im2col(
        input, _int_pair(kernel_size), _int_pair(dilation), _int_pair(padding), _int_pair(stride)
    )


@_overview("sums columns into an image, as `F.fold`; deterministic (no atomics); its gradient is `im2col`",
           layouts=("— (takes `(N, C·kh·kw, L)` columns)",
                    "—",
                    "NCHW image, as `F.fold`"))
def col2im(
    input: Tensor,
    output_size: BroadcastingList2[int],
    kernel_size: BroadcastingList2[int],
    dilation: BroadcastingList2[int] = 1,
    padding: BroadcastingList2[int] = 0,
    stride: BroadcastingList2[int] = 1,
) -> Tensor:
    r"""Sums sliding-window columns back into an image: the same result as
    :func:`torch.nn.functional.fold`, and the adjoint of :func:`im2col`.

    Args:
        input: ``(N, C*kh*kw, L)`` or unbatched ``(C*kh*kw, L)``, with ``L`` the
            number of windows that fit ``output_size``.
        output_size: ``(H, W)`` of the image, or an int for both.
        kernel_size, dilation, padding, stride: as for :func:`im2col`.

    Returns:
        ``(N, C, H, W)`` (or ``(C, H, W)``). Each pixel sums its window entries in a
        fixed order (no atomics), so results are identical run to run on CPU and CUDA.
    """
    if not torch.jit.is_scripting():
        _check_args("col2im", pairs=[("output_size", output_size), ("kernel_size", kernel_size),
                                     ("dilation", dilation), ("padding", padding), ("stride", stride)])
    if isinstance(output_size, int):  # the schema's SymInt[2] does not broadcast an int
        output_size = [output_size, output_size]
    return torch.ops.customops.col2im(
        input, output_size, _int_pair(kernel_size), _int_pair(dilation), _int_pair(padding), _int_pair(stride)
    )
