"""trilinear_interpolation against its plain-PyTorch formula, eager and compiled."""

from __future__ import annotations

from typing import Callable, Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo, State


def trilinear_reference(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    # scaffold: the plain-PyTorch calls the op replaces | raise NotImplementedError("TODO(trilinear_interpolation)")
    """The NeRF formula in plain PyTorch (what customops replaces)."""
    u, v, w = ((points + 1) / 2).unbind(-1)
    u, v, w = u[:, None], v[:, None], w[:, None]
    a, b, c, d = (1 - v) * (1 - w), (1 - v) * w, v * (1 - w), v * w
    f = feats.unbind(1)
    return (1 - u) * (a * f[0] + b * f[1] + c * f[2] + d * f[3]) + u * (a * f[4] + b * f[5] + c * f[6] + d * f[7])
    # scaffold-end


_compiled_trilinear_reference = torch.compile(trilinear_reference, dynamic=False)


def _retained_grad(key: str) -> Callable[[State], object]:
    """Backward alone: the gradients of an output computed once in setup."""
    return lambda s: torch.autograd.grad(s[key], (s["f"], s["p"]), s["g"], retain_graph=True)


def _trilinear_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    # scaffold: the cases: sizes real models use, and the fewest bytes each must move | raise NotImplementedError("TODO(trilinear_interpolation)")
    if device.type == "cuda":
        sizes = ((8192, 256), (2**17, 32)) if quick else ((65536, 256), (2**20, 32))
    else:
        sizes = ((4096, 64),)
    for n, f in sizes:
        def setup(n=n, f=f):
            feats = torch.randn(n, 8, f, device=device, requires_grad=True)
            points = (torch.rand(n, 3, device=device) * 2 - 1).requires_grad_()
            state = {"f": feats, "p": points, "g": torch.randn(n, f, device=device)}
            state["ours"] = customops.trilinear_interpolation(feats, points)
            state["eager"] = trilinear_reference(feats, points)
            state["compile"] = _compiled_trilinear_reference(feats, points)
            return state

        label = f"N={n} F={f}"
        yield Case("trilinear_interpolation", f"forward {label}", torch.float32, setup,
                   ours=lambda s: customops.trilinear_interpolation(s["f"].detach(), s["p"].detach()),
                   pytorch={"eager": lambda s: trilinear_reference(s["f"].detach(), s["p"].detach()),
                            "compile": lambda s: _compiled_trilinear_reference(s["f"].detach(), s["p"].detach())},
                   bytes=4 * (9 * n * f + 3 * n))  # read feats and points, write out
        yield Case("trilinear_interpolation", f"backward {label}", torch.float32, setup,
                   ours=_retained_grad("ours"),
                   pytorch={"eager": _retained_grad("eager"), "compile": _retained_grad("compile")},
                   bytes=4 * (17 * n * f + 6 * n))  # read grad, feats, points; write both gradients
    # scaffold-end


def _trilinear_demo(device: torch.device) -> Demo:
    # scaffold: the demo's module, inputs and reference | raise NotImplementedError("TODO(trilinear_interpolation)")
    torch.manual_seed(0)
    return Demo(customops.TrilinearInterpolation(),
                (torch.randn(4096, 8, 16, device=device), torch.rand(4096, 3, device=device) * 2 - 1),
                trilinear_reference)
    # scaffold-end


BENCH_OPS = [
    BenchOp('trilinear_interpolation', _trilinear_cases, _trilinear_demo),
]
