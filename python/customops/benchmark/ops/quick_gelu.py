"""quick_gelu against x * sigmoid(1.702 x), eager and compiled."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo
from . import _pointwise


def quick_gelu_reference(x: torch.Tensor) -> torch.Tensor:
    """The plain-PyTorch calls the op replaces: the baseline, eager and compiled, and the tests' reference."""
    return x * torch.sigmoid(1.702 * x)


def _quick_gelu_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shape, dtypes, label = _pointwise.default_shape(device, quick)
    return _pointwise.cases("quick_gelu", customops.quick_gelu, quick_gelu_reference, ("x",), device, shape, dtypes,
                            label)


def _quick_gelu_demo(device: torch.device) -> Demo:
    return Demo(customops.QuickGELU(), (torch.randn(64, 1024, device=device) * 4,), quick_gelu_reference)


BENCH_OPS = [
    BenchOp('quick_gelu', _quick_gelu_cases, _quick_gelu_demo),
]
