"""Pieces the decompositions share."""

from __future__ import annotations

import torch


def opmath(dtype: torch.dtype) -> torch.dtype:
    """The type the kernels compute in (at::opmath_type): float32 for the half types."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
