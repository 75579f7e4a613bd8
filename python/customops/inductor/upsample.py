"""upsample_bilinear2d's decompositions: kernels/upsample.h's coordinate maths for each mode, the forward's
blend as four gathers and the backward as their adjoint, four scatter-adds. Inductor turns each into one
kernel and fuses it with its neighbours (the forward with the ReLU that reads its result, the backward with
the ReLU's gradient), as it does for PyTorch's own resize, instead of a pass over the resized tensor more.

On CUDA the backward stays the op, which runs at each call what eager runs (:mod:`customops.backends`: our
gathering kernel, or PyTorch's where the rule or the benchmark mode's timing picks it). Inductor's scatter-adds
lose to both: with them a compiled ``relu(resize(x))`` step took 1.16-1.69x the time of the whole op's step on
the bf16 channels_last downscales measured, the calls for which eager picks PyTorch's kernel
(docs/performance/upsample_choice.md). The CPU graph takes the scatter-adds.

The scatter-adds are atomic additions, whose order varies from run to run. Under
``torch.use_deterministic_algorithms(True)`` the backward stays our kernel, which gathers and so gives the
same bits every run.
"""

from __future__ import annotations

import torch
from torch._prims_common import suggest_memory_format

from ._common import opmath

OP = "upsample_bilinear2d"
DECOMPOSED_BY_DEFAULT = True


def _taps(in_size, out_size, mode: str, device: torch.device, dtype: torch.dtype):
    """Per output index along one axis: the two input indices it blends and the second one's weight."""
    o = torch.arange(out_size, device=device, dtype=dtype)

    def size(n):
        # A symbolic size (dynamic shapes) enters the scale as a tensor of the compute dtype, as in the kernels: a
        # scale of symbolic Python numbers becomes an expression that Triton evaluates in float32, even in a
        # float64 graph (1e-6 off the kernels' coordinates). A static size stays a number: the scale a constant.
        return float(n) if isinstance(n, int) else torch.full((), n, device=device, dtype=dtype)

    if mode == "align_corners":
        scale, off = ((size(in_size) - 1) / (size(out_size) - 1) if out_size > 1 else size(0)), 0.0
    elif mode in ("half_pixel", "asymmetric"):
        scale, off = size(in_size) / size(out_size), (0.5 if mode == "half_pixel" else 0.0)
    else:
        raise ValueError(f"customops::upsample_bilinear2d: unknown coordinate_mode {mode!r}")
    src = (scale * (o + off) - off).clamp_min(0)
    i0 = src.to(torch.int64).clamp_max(in_size - 1)
    i1 = (i0 + 1).clamp_max(in_size - 1)
    return i0, i1, (src - i0.to(dtype)).clamp(0, 1)


def upsample_bilinear2d(input: torch.Tensor, output_size, coordinate_mode: str = "half_pixel") -> torch.Tensor:
    compute = opmath(input.dtype)
    _, _, in_h, in_w = input.shape
    h0, h1, lh = _taps(in_h, output_size[0], coordinate_mode, input.device, compute)
    w0, w1, lw = _taps(in_w, output_size[1], coordinate_mode, input.device, compute)
    x = input.to(compute)
    h0, h1, lh = h0[:, None], h1[:, None], lh[:, None]

    def row(h):
        return x[:, :, h, w0] * (1 - lw) + x[:, :, h, w1] * lw

    out = (row(h0) * (1 - lh) + row(h1) * lh).to(input.dtype)
    # The kernels' layout rule (kernels/upsample.h: result_format): channels_last in, channels_last out.
    if suggest_memory_format(input) == torch.channels_last:
        out = out.contiguous(memory_format=torch.channels_last)
    return out


def upsample_bilinear2d_backward(grad_out: torch.Tensor, input_size, coordinate_mode: str = "half_pixel"):
    if torch.are_deterministic_algorithms_enabled() or grad_out.device.type == "cuda":
        return NotImplemented  # the traced graph keeps the op
    compute = opmath(grad_out.dtype)
    n, c, out_h, out_w = grad_out.shape
    in_h, in_w = input_size
    h0, h1, lh = _taps(in_h, out_h, coordinate_mode, grad_out.device, compute)
    w0, w1, lw = _taps(in_w, out_w, coordinate_mode, grad_out.device, compute)
    g = grad_out.to(compute)
    grad = g.new_zeros((n, c, in_h, in_w))
    h0, h1, lh = h0[:, None], h1[:, None], lh[:, None]
    for h, wh in ((h0, 1 - lh), (h1, lh)):
        for w, ww in ((w0, 1 - lw), (w1, lw)):
            grad = torch.ops.aten.index_put(grad, [None, None, h, w], g * (wh * ww), accumulate=True)
    grad = grad.to(grad_out.dtype)
    if suggest_memory_format(grad_out) == torch.channels_last:
        grad = grad.contiguous(memory_format=torch.channels_last)
    return grad


DECOMPOSITIONS = {"upsample_bilinear2d": upsample_bilinear2d, "upsample_bilinear2d_backward": upsample_bilinear2d_backward}


# This family's rows of the table in docs/design/compile.md, which the docs build reads from here (MyST
# Markdown): the op(s), what compiled graphs do with them, the measurement that made the choice, and why.
DOC_ROWS = [
    (
        "`upsample_bilinear2d`",
        "forward decomposed",
        "decoder (x2, ReLU, 3x3 conv), 32x128x64x64 channels_last: bf16 1.04 / 1.04, float32 1.04 / 1.05 "
        "(forward only)",
        "fuses with the ReLU that reads it",
    ),
    (
        "`upsample_bilinear2d_backward`",
        "the op on CUDA (running eager's choice of kernel) and under `torch.use_deterministic_algorithms(True)`; "
        "scatter-adds on the CPU",
        "bf16 channels_last downscales compiled, scatter-adds / op: 1.16-1.69 ({doc}`/performance/upsample_choice`)",
        "Inductor's scatter-adds lose to our gathering kernel and to PyTorch's; the op runs the faster of those",
    ),
]
