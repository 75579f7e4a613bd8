"""im2col -> Pad + two Gathers + Transpose + Reshape; col2im -> Col2Im.
Under customops.onnx.tflite_friendly(), im2col -> a depthwise Conv with
one-hot filters + Reshape.

ONNX has Col2Im but no Im2Col. The windows of an image are a gather along H
(each window row's input rows) and one along W, after padding with zeros: the
result is (N, C, kh, oh, kw, ow), which a transpose and reshape turn into
F.unfold's (N, C*kh*kw, oh*ow) with rows (c, i, j) and columns (oh, ow). Where
the image size is known at export time (the usual case, also with a dynamic
batch), the indices are constants; otherwise they are computed with Range.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from onnxscript import ir

from ._common import INT64, TFloat, batched, for_tflite, int64_vector, ints, op, pair, static_dim, unbatched
from .._windows import equivalent_window, one_hot_taps


def _window_rows(size: int, k: int, d: int, s: int) -> np.ndarray:
    """(k, out) input positions (in the padded image) of each window's k taps."""
    out = (size - d * (k - 1) - 1) // s + 1
    if out < 1:
        raise ValueError(f"customops.onnx: im2col's kernel (extent {d * (k - 1) + 1}) is larger than the padded "
                         f"input ({size})")
    return np.arange(k, dtype=np.int64)[:, None] * d + np.arange(out, dtype=np.int64)[None, :] * s


def _window_rows_dynamic(x, axis: int, k: int, d: int, p: int, s: int):
    """_window_rows for a size known only at run time."""
    size = op.Gather(op.Shape(x), op.Constant(value_int=axis))  # 0-D
    span = op.Sub(size, op.Constant(value_int=d * (k - 1) - 2 * p))  # window starts lie in [0, span)
    starts = op.Range(op.Constant(value_int=0), span, op.Constant(value_int=s))
    taps = op.Constant(value=ir.tensor((np.arange(k, dtype=np.int64) * d)[:, None]))
    return op.Add(taps, op.Unsqueeze(starts, ints([0])))


def im2col(input: TFloat, kernel_size: Sequence[int], dilation: Sequence[int], padding: Sequence[int],
           stride: Sequence[int]) -> TFloat:
    (kh, kw), (dh, dw) = pair(kernel_size, "kernel_size"), pair(dilation, "dilation")
    (ph, pw), (sh, sw) = pair(padding, "padding"), pair(stride, "stride")
    x, added = batched(input, 4)
    if for_tflite() and static_dim(input, -3) is not None:
        return unbatched(_im2col_as_conv(x, input, (kh, kw), (dh, dw), (ph, pw), (sh, sw)), added)
    if ph or pw:
        x_padded = op.Pad(x, ints([0, 0, ph, pw, 0, 0, ph, pw]))
    else:
        x_padded = x
    h, w = static_dim(x, 2), static_dim(x, 3)
    counts = []  # windows along H and W; None where known only at run time
    gathered = x_padded
    for axis, size, k, d, p, s in ((2, h, kh, dh, ph, sh), (3, w, kw, dw, pw, sw)):
        if size is not None:
            rows = _window_rows(size + 2 * p, k, d, s)
            indices, count = op.Constant(value=ir.tensor(rows)), rows.shape[1]
        else:
            indices, count = _window_rows_dynamic(x, axis, k, d, p, s), None
        counts.append(count)
        # Gather inserts the (k, out) index dimensions where the gathered axis was:
        # H -> (kh, oh) at axes 2, 3; then W, now at axis 4 -> (kw, ow) at axes 4, 5.
        gathered = op.Gather(gathered, indices, axis=2 if axis == 2 else 4)
    windows = op.Transpose(gathered, perm=[0, 1, 2, 4, 3, 5])  # (N, C, kh, kw, oh, ow)
    y = op.Reshape(windows, _output_shape(x, kh * kw, counts))
    return unbatched(y, added)


def _im2col_as_conv(x, input, kernel, dilation, padding, stride):
    """im2col of ``input`` (``x`` is it batched) as a depthwise Conv with one-hot filters (customops._windows).
    The sizes come from ``input``: the exporter knows no shape of the Unsqueeze that batches it."""
    (kh, kw), c = kernel, static_dim(input, -3)
    weight = op.Constant(value=ir.tensor(np.tile(one_hot_taps(kh, kw, input.dtype.numpy()), (c, 1, 1, 1))))
    windows = [equivalent_window(static_dim(input, axis - 4), k, s, p, d)
               for axis, k, s, p, d in zip((2, 3), kernel, stride, padding, dilation)]
    y = op.Conv(x, weight, group=c, kernel_shape=list(kernel), pads=[*padding, *padding],
                strides=[s for s, _ in windows], dilations=[d for _, d in windows])
    return op.Reshape(y, ints([0, c * kh * kw, -1]))


def _output_shape(x, taps: int, counts):
    """(N, C*kh*kw, oh*ow). N is copied (0) rather than inferred (-1), which
    ONNX cannot do for an empty batch."""
    c = static_dim(x, 1)
    windows = -1 if None in counts else counts[0] * counts[1]
    if c is not None:
        return ints([0, c * taps, windows])
    channels = op.Mul(op.Shape(x, start=1, end=2), ints([taps]))
    return op.Concat(ints([0]), channels, ints([windows]), axis=0)


def col2im(input: TFloat, output_size: INT64, kernel_size: Sequence[int], dilation: Sequence[int],
           padding: Sequence[int], stride: Sequence[int]) -> TFloat:
    (ph, pw) = pair(padding, "padding")
    x, added = batched(input, 3)
    y = op.Col2Im(x, int64_vector(output_size), ints(pair(kernel_size, "kernel_size")),
                  dilations=pair(dilation, "dilation"), pads=[ph, pw, ph, pw], strides=pair(stride, "stride"))
    return unbatched(y, added)


TRANSLATIONS = {"im2col": im2col, "col2im": col2im}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
DOC_ROWS = [
    (
        "`im2col`",
        "`Pad` + `Gather` along H + `Gather` along W + `Transpose` + `Reshape` (same layout as `F.unfold`)",
    ),
    (
        "`col2im`",
        "`Col2Im`",
    ),
]
