"""silu_mul against F.silu(a) * b (plain PyTorch), eager and compiled: a SwiGLU MLP's gate, tokens x hidden."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo
from . import _pointwise


def silu_mul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The plain-PyTorch calls the op replaces: the baseline, eager and compiled, and the tests' reference."""
    return torch.nn.functional.silu(a) * b


def _silu_mul_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    # Llama-style MLPs: 8192 tokens x 11008 (7B) on CUDA; smaller on CPU.
    tokens, hidden = ((1024 if quick else 8192), 11008) if device.type == "cuda" else ((64 if quick else 512), 4096)
    dtypes = (torch.bfloat16, torch.float16, torch.float32) if device.type == "cuda" else (torch.float32,)
    return _pointwise.cases("silu_mul", customops.silu_mul, silu_mul_reference, ("a", "b"), device, (tokens, hidden),
                            dtypes, f"{tokens}x{hidden}")


def _silu_mul_demo(device: torch.device) -> Demo:
    a, b = torch.randn(64, 1024, device=device) * 4, torch.randn(64, 1024, device=device)
    return Demo(customops.SiluMul(), (a, b), silu_mul_reference)


BENCH_OPS = [
    BenchOp("silu_mul", _silu_mul_cases, _silu_mul_demo),
]
