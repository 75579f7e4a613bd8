"""conv2d and depthwise_conv2d as aten.convolution: litert-torch's layout pass keeps the model NHWC around
it, and its converter makes CONV_2D, or DEPTHWISE_CONV_2D where the groups are the input's channels."""

from __future__ import annotations

import torch

from .._windows import equivalent_window


def conv2d(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    unbatched = input.dim() == 3
    x = input.unsqueeze(0) if unbatched else input
    windows = [equivalent_window(int(x.shape[axis]), int(weight.shape[axis]), s, p, d)
               for axis, s, p, d in zip((2, 3), stride, padding, dilation)]
    y = torch.ops.aten.convolution.default(x, weight, bias, [s for s, _ in windows], list(padding),
                                           [d for _, d in windows], False, [0, 0], groups)
    return y.squeeze(0) if unbatched else y


def depthwise_conv2d(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    return conv2d(input, weight, bias, stride, padding, dilation, input.shape[-3])


DECOMPOSITIONS = {"conv2d": conv2d, "depthwise_conv2d": depthwise_conv2d}
