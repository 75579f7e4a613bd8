"""Window arithmetic that the converters (customops.onnx, customops.litert) share: the smallest attributes
that mean the same, and im2col as a depthwise convolution, which converters map exactly where they map
gathers badly."""

from __future__ import annotations

from typing import Optional

import numpy as np


def equivalent_window(size: Optional[int], kernel: Optional[int], stride: int, padding: int,
                      dilation: int) -> tuple[int, int]:
    """(stride, dilation) along one axis of ``size`` (None where unknown), replaced by smaller equivalents
    where they cannot change the result: the dilation of a kernel one tap long, a stride past the last window
    (one output either way). The ops take any int64; runtimes and converters hold these in 32 bits."""
    if kernel == 1:
        dilation = 1
    if kernel is not None and size is not None:
        last_start = size + 2 * padding - (dilation * (kernel - 1) + 1)
        if 0 <= last_start < stride:
            stride = last_start + 1  # still past the last window
    return stride, dilation


def one_hot_taps(kh: int, kw: int, dtype) -> np.ndarray:
    """(kh*kw, 1, kh, kw) filters, filter i*kw + j one at tap (i, j) and zero elsewhere. Tiled over the C
    channels of a depthwise convolution, output channel c*kh*kw + i*kw + j is window tap (i, j) of channel c:
    F.unfold's rows. Every product is x * 1 plus zeros, so the result is exact for finite inputs."""
    taps = np.zeros((kh * kw, 1, kh, kw), dtype=dtype)
    index = np.arange(kh * kw)
    taps[index, 0, index // kw, index % kw] = 1
    return taps
