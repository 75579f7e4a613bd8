"""causal_conv1d against the plain-PyTorch call it replaces (a padded depthwise F.conv1d, its tail dropped), eager
and compiled."""

from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F

import customops

from ..table import BenchOp, Case, Demo


def causal_conv1d_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Mamba's path without the fused kernel: F.conv1d padded K-1 on both sides, the last K-1 steps dropped."""
    channels, width = weight.shape
    return F.conv1d(x, weight.unsqueeze(1), bias, padding=width - 1, groups=channels)[..., :x.shape[-1]]


_compiled_reference = torch.compile(causal_conv1d_reference, dynamic=False)


def _grads(key: str):
    """Backward alone: the gradients of an output computed once in setup."""
    return lambda s: torch.autograd.grad(s[key], (s["x"], s["w"], s["b"]), s["g"], retain_graph=True)


def _cases(device: torch.device, quick: bool) -> Iterator[Case]:
    # (batch, channels, steps): Mamba-130M's and Mamba-1.4B's inner widths over 2048-step training sequences.
    if device.type == "cuda":
        shapes, dtype = ([(4, 1536, 1024)] if quick else [(8, 1536, 2048), (4, 4096, 2048)]), torch.bfloat16
    else:
        shapes, dtype = [(2, 256, 512)], torch.float32
    for b, c, n in shapes:
        def setup(b=b, c=c, n=n):
            x = torch.randn(b, c, n, device=device, dtype=dtype, requires_grad=True)
            w = (torch.randn(c, 4, device=device, dtype=dtype) / 2).requires_grad_()
            bias = torch.randn(c, device=device, dtype=dtype, requires_grad=True)
            state = {"x": x, "w": w, "b": bias, "g": torch.randn(b, c, n, device=device, dtype=dtype)}
            state["ours"] = customops.causal_conv1d(x, w, bias)
            state["eager"] = causal_conv1d_reference(x, w, bias)
            state["compile"] = _compiled_reference(x, w, bias)
            return state

        def call(fn):
            return lambda s: fn(s["x"].detach(), s["w"].detach(), s["b"].detach())

        elements = b * c * n * dtype.itemsize
        label = f"B={b} C={c} L={n} K=4"
        yield Case("causal_conv1d", f"forward {label}", dtype, setup, ours=call(customops.causal_conv1d),
                   pytorch={"eager": call(causal_conv1d_reference), "compile": call(_compiled_reference)},
                   bytes=2 * elements)  # read x, write y
        yield Case("causal_conv1d", f"backward {label}", dtype, setup, ours=_grads("ours"),
                   pytorch={"eager": _grads("eager"), "compile": _grads("compile")},
                   bytes=3 * elements)  # read g and x, write dx


def _demo(device: torch.device) -> Demo:
    torch.manual_seed(0)
    m = customops.CausalConv1d(16, 4).to(device)
    return Demo(m, (torch.randn(2, 16, 40, device=device),),
                lambda x: causal_conv1d_reference(x, m.weight.to(x.dtype), m.bias.to(x.dtype)))


BENCH_OPS = [
    BenchOp("causal_conv1d", _cases, _demo),
]
