"""Functional API. Each function calls one registered operator, so it works in
eager mode, under torch.compile and torch.export, and inside TorchScript."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor
from torch._jit_internal import BroadcastingList2


def _int_pair(v: BroadcastingList2[int]) -> list[int]:
    """(height, width) from an int or a pair. int() specialises the values when
    torch.compile(dynamic=True) made them symbolic: window parameters are
    configuration, not shapes, and the schemas take them as int[2]."""
    if isinstance(v, int):
        return [int(v), int(v)]
    return [int(e) for e in v]


def quick_gelu(x: Tensor) -> Tensor:
    r"""Sigmoid approximation of GELU: :math:`y = x \cdot \sigma(1.702\,x)`.

    One fused pass over memory on CPU (vectorised) and CUDA, in place of the three
    that ``x * torch.sigmoid(1.702 * x)`` takes. Finite for every finite input.

    Args:
        x: float16, bfloat16, float32 or float64 tensor of any shape, on CPU or
            CUDA. Half-precision inputs are computed in float32.

    Returns:
        A tensor like ``x``; a dense ``x`` (contiguous, channels_last,
        transposed) keeps its memory layout. Differentiable, twice.

    Example::

        >>> import torch, customops
        >>> customops.quick_gelu(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([-0.1542,  0.0000,  1.9357])
    """
    return torch.ops.customops.quick_gelu(x)


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
    return torch.ops.customops.im2col(
        input, _int_pair(kernel_size), _int_pair(dilation), _int_pair(padding), _int_pair(stride)
    )


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
    if isinstance(output_size, int):  # the schema's SymInt[2] does not broadcast an int
        output_size = [output_size, output_size]
    return torch.ops.customops.col2im(
        input, output_size, _int_pair(kernel_size), _int_pair(dilation), _int_pair(padding), _int_pair(stride)
    )


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: BroadcastingList2[int] = 1,
    padding: BroadcastingList2[int] = 0,
    dilation: BroadcastingList2[int] = 1,
    groups: int = 1,
) -> Tensor:
    r"""2-D convolution, equal to :func:`torch.nn.functional.conv2d` with numeric
    padding, computed as im2col + GEMM (BLAS on CPU, cuBLAS on CUDA).

    The column buffer is built a chunk of the batch at a time, so the extra memory
    stays under ``CUSTOMOPS_CONV2D_WORKSPACE_MIB`` (default 256 MiB; at least one
    image's columns) whatever the batch size. A 1x1, stride-1, unpadded convolution
    multiplies the image directly and allocates no columns.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; float16, bfloat16,
            float32 or float64, on CPU or CUDA. Any memory layout.
        weight: ``(O, C/groups, kh, kw)``, same dtype and device.
        bias: ``(O,)`` or None.
        stride, padding, dilation: an int or a pair ``(height, width)``.
        groups: divides both C and O.

    Returns:
        ``(N, O, out_h, out_w)`` (or unbatched), contiguous. Differentiable twice in
        input, weight and bias. On CUDA, float32 GEMMs use TF32 only where
        ``torch.backends.cuda.matmul.allow_tf32`` allows (off by default), unlike
        cuDNN convolutions, which follow ``torch.backends.cudnn.allow_tf32`` (on).
    """
    return torch.ops.customops.conv2d(
        input, weight, bias, _int_pair(stride), _int_pair(padding), _int_pair(dilation), int(groups)
    )


def depthwise_conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: BroadcastingList2[int] = 1,
    padding: BroadcastingList2[int] = 0,
    dilation: BroadcastingList2[int] = 1,
) -> Tensor:
    r"""Depthwise 2-D convolution: each input channel ``c`` is convolved with its
    own ``m`` filters, giving output channels ``c*m .. c*m+m-1``. Equal to
    ``torch.nn.functional.conv2d(input, weight, bias, stride, padding, dilation,
    groups=C)``, computed by direct kernels (no column buffer), for kernels of any
    size.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; float16, bfloat16,
            float32 or float64, on CPU or CUDA. Any memory layout.
        weight: ``(C*m, 1, kh, kw)`` for a channel multiplier ``m >= 1``.
        bias: ``(C*m,)`` or None.
        stride, padding, dilation: an int or a pair ``(height, width)``.

    Returns:
        ``(N, C*m, out_h, out_w)`` (or unbatched), contiguous. Differentiable twice.
        The weight gradient is reduced in a fixed order: identical run to run.
    """
    return torch.ops.customops.depthwise_conv2d(
        input, weight, bias, _int_pair(stride), _int_pair(padding), _int_pair(dilation)
    )
