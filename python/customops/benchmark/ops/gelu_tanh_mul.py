"""gelu_tanh_mul against the plain-PyTorch calls it replaces, eager and compiled."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo, grad_of


def gelu_tanh_mul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The plain-PyTorch calls the op replaces: the baseline, eager and compiled, and the tests' reference."""
    return torch.nn.functional.gelu(a, approximate="tanh") * b


_compiled_gelu_tanh_mul_reference = torch.compile(gelu_tanh_mul_reference, dynamic=False)


def _gelu_tanh_mul_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        n, dtypes = (4 if quick else 64) * 2**20, (torch.float32, torch.float16, torch.bfloat16)
    else:
        n, dtypes = (1 if quick else 4) * 2**20, (torch.float32,)
    for dtype in dtypes:
        size = n * torch.empty((), dtype=dtype).element_size()

        def setup(dtype=dtype):
            a, b = (torch.randn(n, device=device, dtype=dtype, requires_grad=True) for _ in range(2))
            return {"a": a, "b": b, "g": torch.randn_like(a)}

        label = f"n={n // 2**20}M"
        yield Case("gelu_tanh_mul", f"forward {label}", dtype, setup,
                   ours=lambda s: customops.gelu_tanh_mul(s["a"].detach(), s["b"].detach()),
                   pytorch={"eager": lambda s: gelu_tanh_mul_reference(s["a"].detach(), s["b"].detach()),
                            "compile": lambda s: _compiled_gelu_tanh_mul_reference(s["a"].detach(), s["b"].detach())},
                   bytes=3 * size)  # read a, b, write y
        yield Case("gelu_tanh_mul", f"fwd+bwd {label}", dtype, setup,
                   ours=grad_of(customops.gelu_tanh_mul, "a", "b"),
                   pytorch={"eager": grad_of(gelu_tanh_mul_reference, "a", "b"),
                            "compile": grad_of(_compiled_gelu_tanh_mul_reference, "a", "b")},
                   bytes=8 * size)  # forward: the inputs, y; backward: g, the inputs, their gradients


def _gelu_tanh_mul_demo(device: torch.device) -> Demo:
    inputs = tuple(torch.randn(64, 1024, device=device) * 4 for _ in range(2))
    return Demo(customops.GeluTanhMul(), inputs, gelu_tanh_mul_reference)


BENCH_OPS = [
    BenchOp("gelu_tanh_mul", _gelu_tanh_mul_cases, _gelu_tanh_mul_demo),
]
