"""causal_conv1d's decompositions: the steps padded with K-1 zeros before them, then ATen's depthwise
convolution over (B, C, 1, L) and its backward (cuDNN's, oneDNN's). The op stays whole by default: the
decomposition's convolution is a library call, not code Inductor generates and fuses, so it gains nothing there
and is slower (the measurement below). litert-torch converts through it (PAD and DEPTHWISE_CONV_2D)."""

from __future__ import annotations

import torch

from ..functional.causal_conv1d import _channel_last

OP = "causal_conv1d"
DECOMPOSED_BY_DEFAULT = False

aten = torch.ops.aten


def _geometry(x: torch.Tensor, weight: torch.Tensor):
    """x padded before its steps as (B, C, 1, L + K-1), and the filters as (C, 1, 1, K)."""
    width = weight.shape[1]
    return aten.constant_pad_nd(x, [width - 1, 0]).unsqueeze(2), weight[:, None, None, :]


def _empty(x: torch.Tensor) -> bool:
    # ATen's convolution refuses no channels, and no steps (a padded input shorter than the filter).
    return x.shape[1] == 0 or x.shape[2] == 0


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias=None) -> torch.Tensor:
    if _empty(x):
        return x.new_empty(x.shape)
    padded, filters = _geometry(x, weight)
    y = aten.convolution(padded, filters, bias, [1, 1], [0, 0], [1, 1], False, [0, 0], x.shape[1])
    return y.squeeze(2).contiguous()


def causal_conv1d_backward(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, output_mask):
    channels, width = weight.shape
    if _empty(x):  # the sums over no steps are 0
        return (x.new_empty(x.shape) if output_mask[0] else None,
                weight.new_zeros(weight.shape) if output_mask[1] else None,
                x.new_zeros(channels) if output_mask[2] else None)
    padded, filters = _geometry(x, weight)
    gx, gw, gb = aten.convolution_backward(grad_out.unsqueeze(2), padded, filters, [channels], [1, 1], [0, 0],
                                           [1, 1], False, [0, 0], channels, list(output_mask))
    gx = None if gx is None else gx.squeeze(2)[:, :, width - 1:].contiguous()
    gw = None if gw is None else gw.reshape(channels, width)
    return gx, gw, gb


def causal_conv1d_mamba(x: torch.Tensor, weight: torch.Tensor, bias=None, activation=None, seq_idx=None,
                        initial_states=None) -> torch.Tensor:
    """The training call with Mamba's arguments: initial_states (or K-1 zeros) before the steps, then ATen's
    depthwise convolution; over packed sequences, tap by tap (summed in float32 for the half types, as the
    kernels do), each tap masked where the step it reads has another seq_idx; the SiLU after. The result has x's
    layout (channel-last or contiguous), as the kernels give it."""
    width = weight.shape[1]
    if initial_states is not None:
        steps = aten.cat([initial_states, x], 2)
    else:
        steps = aten.constant_pad_nd(x, [width - 1, 0])
    if _empty(x):
        y = x.new_zeros(x.shape)
    elif seq_idx is None:
        y = aten.convolution(steps.unsqueeze(2), weight[:, None, None, :], bias, [1, 1], [0, 0], [1, 1], False,
                             [0, 0], x.shape[1]).squeeze(2)
        y = y if activation is None else aten.silu(y)
    else:
        n, wide = x.shape[2], torch.promote_types(x.dtype, torch.float32)
        ids = aten.constant_pad_nd(seq_idx, [width - 1, 0], -1)
        w = weight.to(wide)
        y = sum(w[:, k, None] * steps[:, :, k:k + n].to(wide) * (ids[:, None, k:k + n] == seq_idx[:, None, :])
                for k in range(width))
        if bias is not None:
            y = y + bias[:, None].to(wide)
        y = (y if activation is None else aten.silu(y)).to(x.dtype)
    return y.transpose(1, 2).contiguous().transpose(1, 2) if _channel_last(x) else y.contiguous()


DECOMPOSITIONS = {"causal_conv1d": causal_conv1d, "causal_conv1d_backward": causal_conv1d_backward,
                  "causal_conv1d.mamba": causal_conv1d_mamba}


# This family's rows of the table in docs/design/compile.md, which the docs build reads from here (MyST
# Markdown): the op(s), what compiled graphs do with them, the measurement that made the choice, and why.
DOC_ROWS = [
    (
        "`causal_conv1d` (+ backward)",
        "kept",
        "Mamba mixer (`mamba_conv`, 8x2048x768): compiled step 0.89 / 0.93 of the original's kept, 1.11 / 1.03 "
        "decomposed (bf16 / float32)",
        "the decomposition's depthwise convolution is a library call (cuDNN, oneDNN), fused with nothing",
    ),
]
