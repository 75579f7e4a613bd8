"""conv2d and depthwise_conv2d: ``aten.convolution`` (customops.litert's decompositions), which XNNPACK runs; and
for depthwise_conv2d customops' blocked CPU forward in ExecuTorch's runtime (kernels/executorch/depthwise_conv2d.cpp,
the kernel of kernels/core/depthwise_conv2d.h that libtorch's CPU kernel runs), on the calls it takes."""

from __future__ import annotations

import torch

from ..inductor.conv import _pair
from ..litert import conv as _litert

DECOMPOSITIONS = dict(_litert.DECOMPOSITIONS)

# The blocked forward's condition (kernels/core/depthwise_conv2d.h, blocked_applies): a vector of V channels per
# task (8 floats; 4 doubles), at least 3/4 of its lanes busy, a channel multiplier of 1, and a task's buffer of V
# padded planes within 16 MiB. P output pixels a block.
_LANES = {torch.float64: 4, torch.float32: 8, torch.float16: 8, torch.bfloat16: 8}
_PIXELS = 8
_BUFFER_BYTES = 16 << 20


def _ints(*values) -> bool:
    return all(isinstance(v, int) for v in values)


def depthwise_takes_kernel(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)) -> bool:
    """Whether customops' ExecuTorch kernel runs this call (the others are decomposed): 4-D input of a floating
    dtype in the default (NCHW) dim order, channel multiplier 1, enough channels to fill the vectors, static
    sizes."""
    lanes = _LANES.get(input.dtype)
    # ExecuTorch keeps a channels_last input's dim order; the kernel reads the default one.
    if lanes is None or input.dim() != 4 or weight.dim() != 4 or not input.is_contiguous():
        return False
    (N, C, H, W), (O, _, kh, kw) = input.shape, weight.shape
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    if not _ints(N, C, H, W, O, kh, kw, *stride, *padding, *dilation) or C == 0 or O != C:
        return False
    blocks = -(-C // lanes)
    if 4 * C < 3 * blocks * lanes:
        return False
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    out_h = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    out_w = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out_wp = -(-out_w // _PIXELS) * _PIXELS
    rows = (out_h - 1) * sh + (kh - 1) * dh + 1
    cols = (out_wp - 1) * sw + (kw - 1) * dw + 1
    opmath_bytes = 8 if input.dtype == torch.float64 else 4
    return rows * cols * lanes * opmath_bytes <= _BUFFER_BYTES


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
