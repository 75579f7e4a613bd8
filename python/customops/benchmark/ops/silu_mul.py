"""silu_mul against F.silu(a) * b (plain PyTorch), eager and compiled: a SwiGLU MLP's gate, tokens x hidden."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo, grad_of


def silu_mul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The plain-PyTorch calls the op replaces: the baseline, eager and compiled, and the tests' reference."""
    return torch.nn.functional.silu(a) * b


_compiled_silu_mul_reference = torch.compile(silu_mul_reference, dynamic=False)


def _silu_mul_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    # Llama-style MLPs: 8192 tokens x 11008 (7B) on CUDA; smaller on CPU.
    tokens, hidden = ((1024 if quick else 8192), 11008) if device.type == "cuda" else ((64 if quick else 512), 4096)
    dtypes = (torch.bfloat16, torch.float16, torch.float32) if device.type == "cuda" else (torch.float32,)
    for dtype in dtypes:
        size = tokens * hidden * torch.empty((), dtype=dtype).element_size()

        def setup(dtype=dtype):
            a, b = (torch.randn(tokens, hidden, device=device, dtype=dtype, requires_grad=True) for _ in "ab")
            return {"a": a, "b": b, "g": torch.randn_like(a)}

        label = f"{tokens}x{hidden}"
        yield Case("silu_mul", f"forward {label}", dtype, setup,
                   ours=lambda s: customops.silu_mul(s["a"].detach(), s["b"].detach()),
                   pytorch={"eager": lambda s: silu_mul_reference(s["a"].detach(), s["b"].detach()),
                            "compile": lambda s: _compiled_silu_mul_reference(s["a"].detach(), s["b"].detach())},
                   bytes=3 * size)  # read a, b, write y
        yield Case("silu_mul", f"fwd+bwd {label}", dtype, setup,
                   ours=grad_of(customops.silu_mul, "a", "b"),
                   pytorch={"eager": grad_of(silu_mul_reference, "a", "b"),
                            "compile": grad_of(_compiled_silu_mul_reference, "a", "b")},
                   bytes=8 * size)  # forward: a, b, y; backward: g, a, b, da, db


def _silu_mul_demo(device: torch.device) -> Demo:
    a, b = torch.randn(64, 1024, device=device) * 4, torch.randn(64, 1024, device=device)
    return Demo(customops.SiluMul(), (a, b), silu_mul_reference)


BENCH_OPS = [
    BenchOp("silu_mul", _silu_mul_cases, _silu_mul_demo),
]
