"""causal_conv1d -> one depthwise Conv over (B, C, 1, L): the steps padded with K-1 zeros before them only.

The 2-D form (Unsqueeze, Conv with kernel (1, K), Squeeze) rather than a 1-D Conv: converters to TF-Lite
(onnx2tf) turn a 2-D depthwise Conv into DEPTHWISE_CONV_2D, the operator TF-Lite runs fast everywhere."""

from __future__ import annotations

from typing import Optional

from ._common import TFloat, ints, op, static_dim


def causal_conv1d(x: TFloat, weight: TFloat, bias: Optional[TFloat] = None) -> TFloat:
    # Conv's group and kernel_shape are attributes: the channel count and width must be numbers at export time.
    channels, width = static_dim(x, 1), static_dim(weight, 1)
    if channels is None or width is None:
        raise ValueError("customops.onnx: causal_conv1d needs the channel count and the filter width at export "
                         "time (ONNX Conv's group and kernel_shape); do not mark them dynamic")
    if channels == 0 or static_dim(x, 2) == 0:
        return op.Identity(x)  # nothing to compute (and Conv refuses 0 groups, or an input shorter than its filter)
    inputs = [op.Unsqueeze(x, ints([2])), op.Unsqueeze(weight, ints([1, 2]))]
    if bias is not None:
        inputs.append(bias)
    y = op.Conv(*inputs, kernel_shape=[1, width], pads=[0, width - 1, 0, 0], group=channels)
    return op.Squeeze(y, ints([2]))


TRANSLATIONS = {"causal_conv1d": causal_conv1d}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
DOC_ROWS = [
    (
        "`causal_conv1d`",
        "`Conv` with group = channels over `(B, C, 1, L)`, padded `K-1` before (`Unsqueeze`, `Squeeze` around it)",
    ),
]
