"""causal_conv1d -> one depthwise Conv over (B, C, 1, L): the steps padded with K-1 zeros before them only.

The 2-D form (Unsqueeze, Conv with kernel (1, K), Squeeze) rather than a 1-D Conv: converters to TF-Lite
(onnx2tf) turn a 2-D depthwise Conv into DEPTHWISE_CONV_2D, the operator TF-Lite runs fast everywhere."""

from __future__ import annotations

from typing import Optional

from onnxscript import INT32

from ._common import TFloat, ints, op, static_dim


def _geometry(x, weight) -> tuple[int, int]:
    # Conv's group and kernel_shape are attributes: the channel count and width must be numbers at export time.
    channels, width = static_dim(x, 1), static_dim(weight, 1)
    if channels is None or width is None:
        raise ValueError("customops.onnx: causal_conv1d needs the channel count and the filter width at export "
                         "time (ONNX Conv's group and kernel_shape); do not mark them dynamic")
    return channels, width


def _conv(steps, weight, bias, channels: int, width: int, before: int):
    """The depthwise Conv over (B, C, 1, steps), padded with `before` zeros ahead of them."""
    inputs = [op.Unsqueeze(steps, ints([2])), op.Unsqueeze(weight, ints([1, 2]))]
    if bias is not None:
        inputs.append(bias)
    y = op.Conv(*inputs, kernel_shape=[1, width], pads=[0, before, 0, 0], group=channels)
    return op.Squeeze(y, ints([2]))


def causal_conv1d(x: TFloat, weight: TFloat, bias: Optional[TFloat] = None) -> TFloat:
    channels, width = _geometry(x, weight)
    if channels == 0 or static_dim(x, 2) == 0:
        return op.Identity(x)  # nothing to compute (and Conv refuses 0 groups, or an input shorter than its filter)
    return _conv(x, weight, bias, channels, width, width - 1)


def _packed(x, weight, bias, seq_idx, width: int):
    """Tap by tap over packed sequences: tap k reads step t - (K-1) + k, and counts where that step's seq_idx is
    t's (the K-1 steps padded before t = 0 have index -1, no sequence's). No Conv can mask its taps per step."""
    # Tap k's window of the padded steps is [k, k + L); where L is not known at export time its end counts from
    # the end (the last tap's is INT64_MAX, Slice's "to the end"). onnx2tf reads a huge end other than INT64_MAX
    # as an empty window.
    length = static_dim(x, 2)
    steps = op.Pad(x, ints([0, 0, width - 1, 0, 0, 0]))
    ids = op.Pad(seq_idx, ints([0, width - 1, 0, 0]), op.CastLike(op.Constant(value_int=-1), seq_idx))
    y = None
    for k in range(width):
        stop = [k + length] if length is not None else [k - (width - 1) or 2**63 - 1]
        same = op.CastLike(op.Equal(op.Slice(ids, ints([k]), ints(stop), ints([1])), seq_idx), x)
        tap = op.Slice(weight, ints([k]), ints([k + 1]), ints([1]))  # (C, 1): broadcast over (B, C, L)
        term = op.Mul(op.Mul(op.Slice(steps, ints([k]), ints(stop), ints([2])), tap), op.Unsqueeze(same, ints([1])))
        y = term if y is None else op.Add(y, term)
    if bias is not None:
        y = op.Add(y, op.Unsqueeze(bias, ints([1])))
    return y


def causal_conv1d_mamba(x: TFloat, weight: TFloat, bias: Optional[TFloat] = None, activation: Optional[str] = None,
                        seq_idx: Optional[INT32] = None, initial_states: Optional[TFloat] = None) -> TFloat:
    """The training call with Mamba's arguments: initial_states concatenated before x (the Conv then pads
    nothing), seq_idx's masks tap by tap, the SiLU as y * Sigmoid(y)."""
    channels, width = _geometry(x, weight)
    if channels == 0 or static_dim(x, 2) == 0:
        return op.Identity(x)
    if seq_idx is not None:
        y = _packed(x, weight, bias, seq_idx, width)
    elif initial_states is not None and width > 1:
        y = _conv(op.Concat(initial_states, x, axis=2), weight, bias, channels, width, 0)
    else:
        y = _conv(x, weight, bias, channels, width, width - 1)
    if activation is not None:
        y = op.Mul(y, op.Sigmoid(y))
    return y


TRANSLATIONS = {"causal_conv1d": causal_conv1d, "causal_conv1d.mamba": causal_conv1d_mamba}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
DOC_ROWS = [
    (
        "`causal_conv1d`",
        "`Conv` with group = channels over `(B, C, 1, L)`, padded `K-1` before (`Unsqueeze`, `Squeeze` around it)",
    ),
    (
        "`causal_conv1d.mamba`",
        "`initial_states`: `Concat` before x, then the `Conv` unpadded; `seq_idx`: tap by tap, each `Slice` of x "
        "times its weight and an `Equal` of the sequence indices; SiLU: `y * Sigmoid(y)`",
    ),
]
