"""conv2d -> Conv (strides, pads, dilations, group, bias); depthwise_conv2d ->
Conv with group = input channels. Padding is symmetric in both ops (the
functional API pads the extra row/column of an odd 'same' before the op)."""

from __future__ import annotations

from typing import Optional, Sequence

from .._windows import equivalent_window
from ._common import TFloat, batched, op, pair, static_dim, unbatched


def _conv(input, weight, bias, stride, padding, dilation, groups: int):
    x, added = batched(input, 4)
    ph, pw = pair(padding, "padding")
    windows = [equivalent_window(static_dim(input, axis - 4), static_dim(weight, axis), s, p, d)
               for axis, s, p, d in zip((2, 3), pair(stride, "stride"), (ph, pw), pair(dilation, "dilation"))]
    inputs = [x, weight] if bias is None else [x, weight, bias]
    attrs = dict(strides=[s for s, _ in windows], pads=[ph, pw, ph, pw], dilations=[d for _, d in windows],
                 group=groups)
    kh, kw = static_dim(weight, 2), static_dim(weight, 3)
    if kh is not None and kw is not None:
        attrs["kernel_shape"] = [kh, kw]  # optional in ONNX; converters and runtimes read it
    return unbatched(op.Conv(*inputs, **attrs), added)


def conv2d(input: TFloat, weight: TFloat, bias: Optional[TFloat] = None, stride: Sequence[int] = (1, 1),
           padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1), groups: int = 1) -> TFloat:
    return _conv(input, weight, bias, stride, padding, dilation, groups)


def depthwise_conv2d(input: TFloat, weight: TFloat, bias: Optional[TFloat] = None, stride: Sequence[int] = (1, 1),
                     padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1)) -> TFloat:
    # Conv's group is an attribute: the channel count must be a number at export time
    # (it is, unless the channel dimension itself was made dynamic).
    channels = static_dim(input, -3)
    if channels is None:
        raise ValueError("customops.onnx: depthwise_conv2d needs the input's channel count at export time "
                         "(ONNX Conv's group attribute); do not mark the channel dimension dynamic")
    return _conv(input, weight, bias, stride, padding, dilation, channels)


TRANSLATIONS = {"conv2d": conv2d, "depthwise_conv2d": depthwise_conv2d}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
DOC_ROWS = [
    (
        "`conv2d`",
        "`Conv` with the op's `strides`, `pads`, `dilations`, `group` and bias",
    ),
    (
        "`depthwise_conv2d`",
        "`Conv` with `group` = input channels",
    ),
]
