"""quick_gelu against x * sigmoid(1.702 x), eager and compiled."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo, grad_of


def quick_gelu_reference(x: torch.Tensor) -> torch.Tensor:
    """The plain-PyTorch calls the op replaces: the baseline, eager and compiled, and the tests' reference."""
    return x * torch.sigmoid(1.702 * x)


_compiled_quick_gelu_reference = torch.compile(quick_gelu_reference, dynamic=False)


def _quick_gelu_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        n = (4 if quick else 64) * 2**20
        dtypes = (torch.float32, torch.float16, torch.bfloat16)
    else:
        n = (1 if quick else 4) * 2**20
        dtypes = (torch.float32,)
    for dtype in dtypes:
        size = n * torch.empty((), dtype=dtype).element_size()

        def setup(dtype=dtype):
            x = torch.randn(n, device=device, dtype=dtype, requires_grad=True)
            return {"x": x, "g": torch.randn_like(x)}

        label = f"n={n // 2**20}M"
        yield Case("quick_gelu", f"forward {label}", dtype, setup,
                   ours=lambda s: customops.quick_gelu(s["x"].detach()),
                   pytorch={"eager": lambda s: quick_gelu_reference(s["x"].detach()),
                            "compile": lambda s: _compiled_quick_gelu_reference(s["x"].detach())},
                   bytes=2 * size)  # read x, write y
        yield Case("quick_gelu", f"fwd+bwd {label}", dtype, setup,
                   ours=grad_of(customops.quick_gelu),
                   pytorch={"eager": grad_of(quick_gelu_reference),
                            "compile": grad_of(_compiled_quick_gelu_reference)},
                   bytes=5 * size)  # forward: x, y; backward: g, x, dx


def _quick_gelu_demo(device: torch.device) -> Demo:
    return Demo(customops.QuickGELU(), (torch.randn(64, 1024, device=device) * 4,), quick_gelu_reference)


BENCH_OPS = [
    BenchOp('quick_gelu', _quick_gelu_cases, _quick_gelu_demo),
]
