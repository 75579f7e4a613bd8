"""gelu_tanh_mul against the plain-PyTorch calls it replaces, eager and compiled."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo
from . import _pointwise


def gelu_tanh_mul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The plain-PyTorch calls the op replaces: the baseline, eager and compiled, and the tests' reference."""
    return torch.nn.functional.gelu(a, approximate="tanh") * b


def _gelu_tanh_mul_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shape, dtypes, label = _pointwise.default_shape(device, quick)
    return _pointwise.cases("gelu_tanh_mul", customops.gelu_tanh_mul, gelu_tanh_mul_reference, ("a", "b"), device,
                            shape, dtypes, label)


def _gelu_tanh_mul_demo(device: torch.device) -> Demo:
    inputs = tuple(torch.randn(64, 1024, device=device) * 4 for _ in range(2))
    return Demo(customops.GeluTanhMul(), inputs, gelu_tanh_mul_reference)


BENCH_OPS = [
    BenchOp("gelu_tanh_mul", _gelu_tanh_mul_cases, _gelu_tanh_mul_demo),
]
