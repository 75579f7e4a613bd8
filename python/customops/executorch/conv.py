"""conv2d and depthwise_conv2d: ``aten.convolution`` (customops.litert's decompositions), which XNNPACK runs; and
for depthwise_conv2d customops' CPU forward in ExecuTorch's runtime (kernels/executorch/depthwise_conv2d.cpp, the
kernels of kernels/core/ that libtorch's CPU kernel runs), on the calls it takes."""

from __future__ import annotations

import torch

from ..inductor.conv import _pair
from ..litert import conv as _litert

DECOMPOSITIONS = dict(_litert.DECOMPOSITIONS)

# A task's zero-padded input plane past this size goes to the decomposition: the kernel stages one plane a task
# (kernels/core/depthwise_conv2d_rows.h), which for a huge padding or dilation would not fit in memory.
_PLANE_BYTES = 1 << 30
_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def _ints(*values) -> bool:
    return all(isinstance(v, int) for v in values)


def depthwise_takes_kernel(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)) -> bool:
    """Whether customops' ExecuTorch kernel runs this call (the others are decomposed): 4-D input of a floating
    dtype in the default (NCHW) dim order, static sizes, and a zero-padded plane of at most 1 GiB."""
    # ExecuTorch keeps a channels_last input's dim order; the kernel reads the default one.
    if input.dtype not in _DTYPES or input.dim() != 4 or weight.dim() != 4 or not input.is_contiguous():
        return False
    (N, C, H, W), (O, _, kh, kw) = input.shape, weight.shape
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if not _ints(N, C, H, W, O, kh, kw, *stride, *padding, *dilation) or C == 0 or O % C:
        return False
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    out_h = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    out_w = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    cols = (out_w - 1) * sw + (kw - 1) * dw + 1
    opmath_bytes = 8 if input.dtype == torch.float64 else 4
    # Each staged row runs a few vectors of zeros past the plane (at most 64 values on any instruction set).
    return rows * (cols + 64) * opmath_bytes <= _PLANE_BYTES


# XNNPACK's own depthwise kernels take filters of up to 25 taps (3x3, 5x5) in one pass and run them about as fast
# as customops' (0.72-1.23x its time, op alone), and a call left to customops' kernel splits XNNPACK's partition:
# in a network that cost more than the op gained (MobileNetV2, all its 3x3 layers on the kernel: 1.92x the time of
# its twin). Wider filters take XNNPACK 5-8x customops' time (docs/deploy.md).
_XNNPACK_ONE_PASS_TAPS = 25


def depthwise_uses_kernel(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)) -> bool:
    """Whether a call on the kernel route takes customops' kernel: one it runs (depthwise_takes_kernel) with a
    filter wider than XNNPACK runs in one pass."""
    return (depthwise_takes_kernel(input, weight, bias, stride, padding, dilation)
            and int(weight.shape[2]) * int(weight.shape[3]) > _XNNPACK_ONE_PASS_TAPS)


KERNELS = {"depthwise_conv2d": "kernel"}
KERNEL_WHEN = {"depthwise_conv2d": depthwise_uses_kernel}
