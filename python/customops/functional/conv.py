"""customops.conv2d and customops.depthwise_conv2d, with F.conv2d's arguments."""

from __future__ import annotations

from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch._jit_internal import BroadcastingList2

from ._common import _check_args, _int_pair, _overview

__all__ = ["conv2d", "depthwise_conv2d"]


def _padding_sides(padding: Union[str, int, List[int], Tuple[int, int]], kernel_size: List[int],
                   stride: List[int], dilation: List[int]) -> List[List[int]]:
    """(before, after) padding per spatial dimension, as F.conv2d reads its
    padding argument, with F.conv2d's errors. 'same' pads d*(k-1) in all, the
    odd one after (bottom, right), as ATen's conv_padding_same."""
    if isinstance(padding, str):
        if padding == "valid":
            return [[0, 0], [0, 0]]
        if padding != "same":
            raise RuntimeError("Invalid padding string: '" + padding + "'")
        if stride[0] != 1 or stride[1] != 1:
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        sides: List[List[int]] = []
        for i in range(2):
            total = dilation[i] * (kernel_size[i] - 1)
            sides.append([total // 2, total - total // 2])
        return sides
    # One branch per type: TorchScript refines a Union only through isinstance.
    elif isinstance(padding, int):
        return [[int(padding), int(padding)], [int(padding), int(padding)]]
    elif isinstance(padding, list):
        return [[int(padding[0]), int(padding[0])], [int(padding[1]), int(padding[1])]]
    else:
        return [[int(padding[0]), int(padding[0])], [int(padding[1]), int(padding[1])]]


def _pad_for_conv(op: str, input: Tensor, sides: List[List[int]]) -> Tuple[Tensor, List[int]]:
    """The input and the symmetric padding for the op: the kernels pad both
    sides alike, so the extra row/column of an asymmetric 'same' is added here."""
    (top, bottom), (left, right) = sides[0], sides[1]
    # An input of the wrong rank goes to the op unpadded, for its own error.
    if (bottom != top or right != left) and input.dim() in (3, 4):
        if not torch.jit.is_scripting():
            _check_padded_fits(op, input, [bottom - top, right - left])
        input = torch.nn.functional.pad(input, [0, right - left, 0, bottom - top])
    return input, [top, left]


def _check_padded_fits(op: str, input: Tensor, extra: List[int]) -> None:
    """F.pad of a huge (expanded) input fails in its stride computation with a
    message naming nothing; say which argument it was, as the op would."""
    sizes = [*input.shape[:-2], input.shape[-2] + extra[0], input.shape[-1] + extra[1]]
    count = input.element_size()
    for s in sizes:
        count *= max(s, 1)
    if count >= 2**63:
        raise RuntimeError(f"customops::{op}: input padded for padding='same' to sizes {sizes} overflows int64")


@_overview('`F.conv2d`, with its arguments (`padding` an int, a pair, `"same"` or `"valid"`; unbatched input); the '
           "module takes `nn.Conv2d`'s, `padding_mode` included; algorithms: {doc}`/design/conv2d`",
           layouts=("native on the im2col + GEMM path (CPU; CUDA where no faster kernel applies); on CUDA the "
                    "implicit-GEMM and direct grouped kernels, and in the half types the stem kernels where the "
                    "windows overlap, take it through a tiled transpose to NHWC and back",
                    "native on CUDA where the implicit-GEMM, direct grouped, stem or TF32 weight-gradient kernels "
                    "apply ({doc}`/design/conv2d`), otherwise converted to NCHW for im2col and back",
                    "the input's"))
def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: BroadcastingList2[int] = 1,
    padding: Union[str, int, List[int], Tuple[int, int]] = 0,
    dilation: BroadcastingList2[int] = 1,
    groups: int = 1,
) -> Tensor:
    r"""2-D convolution, equal to :func:`torch.nn.functional.conv2d` for the same
    arguments.

    On CPU it is im2col + GEMM (BLAS). On CUDA it picks an algorithm per call and
    per pass: implicit-GEMM kernels (CUTLASS, compute capability 9.0), direct
    kernels for grouped convolutions, few-channel stems and weight gradients, or
    im2col + cuBLAS; ``TORCH_CPP_LOG_LEVEL=INFO`` logs each choice. The im2col
    path builds its column buffer a chunk of the batch at a time, so the extra
    memory stays under ``CUSTOMOPS_CONV2D_WORKSPACE_MIB`` (default 256 MiB; at
    least one image's columns) whatever the batch size; the other algorithms, and
    1x1 stride-1 unpadded convolutions, allocate no columns.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; float16, bfloat16,
            float32 or float64, on CPU or CUDA. Any memory layout.
        weight: ``(O, C/groups, kh, kw)``, same dtype and device.
        bias: ``(O,)`` or None.
        stride, dilation: an int or a pair ``(height, width)``.
        padding: an int, a pair, ``"valid"`` (none) or ``"same"`` (output size = input
            size; stride 1 only, else RuntimeError as ``F.conv2d``). An odd total
            ``dilation * (k - 1)`` puts the extra row/column at the bottom/right, as
            ``F.conv2d`` does; that one is padded by ``F.pad`` before the op.
        groups: divides both C and O.

    Returns:
        ``(N, O, out_h, out_w)`` (or unbatched), channels_last for a channels_last input, else
        contiguous (as ``F.conv2d``). Differentiable twice in
        input, weight and bias. On CUDA, float32 uses TF32 only where
        ``torch.backends.cuda.matmul.allow_tf32`` allows (off by default), unlike
        cuDNN convolutions, which follow ``torch.backends.cudnn.allow_tf32`` (on);
        the weight gradient of grouped convolutions that take the direct grouped
        kernels (groups of 4-32 channels) is computed in float32 either way.
    """
    if not torch.jit.is_scripting():
        _check_args("conv2d", tensors=[("input", input, 0), ("weight", weight, 2)],
                    pairs=[("stride", stride), ("dilation", dilation)], padding=padding)
    strides, dilations = _int_pair(stride), _int_pair(dilation)
    sides = _padding_sides(padding, [weight.shape[-2], weight.shape[-1]], strides, dilations)
    input, pads = _pad_for_conv("conv2d", input, sides)
    return torch.ops.customops.conv2d(input, weight, bias, strides, pads, dilations, int(groups))


@_overview("`F.conv2d(..., groups=C)` for weights `(C*m, 1, kh, kw)`, any kernel size; direct kernels, no "
           "im2col; deterministic weight gradient",
           layouts=("native",
                    "native kernels (CPU and CUDA: forward, input and weight gradient)",
                    "the input's (output and input gradient)"))
def depthwise_conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: BroadcastingList2[int] = 1,
    padding: Union[str, int, List[int], Tuple[int, int]] = 0,
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
        stride, dilation: an int or a pair ``(height, width)``.
        padding: an int, a pair, ``"valid"`` or ``"same"``, as for :func:`conv2d`.

    Returns:
        ``(N, C*m, out_h, out_w)`` (or unbatched), channels_last for a channels_last input (computed
        by NHWC kernels, no conversion), else contiguous. Differentiable twice.
        The weight gradient is reduced in a fixed order: identical run to run.
    """
    if not torch.jit.is_scripting():
        _check_args("depthwise_conv2d", tensors=[("input", input, 0), ("weight", weight, 2)],
                    pairs=[("stride", stride), ("dilation", dilation)], padding=padding)
    strides, dilations = _int_pair(stride), _int_pair(dilation)
    sides = _padding_sides(padding, [weight.shape[-2], weight.shape[-1]], strides, dilations)
    input, pads = _pad_for_conv("depthwise_conv2d", input, sides)
    return torch.ops.customops.depthwise_conv2d(input, weight, bias, strides, pads, dilations)
