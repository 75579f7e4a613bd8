"""customops.__op__."""

from __future__ import annotations

import torch
from torch import Tensor

from ._common import _overview

__all__ = ["__op__"]


@_overview("TODO(__op__): its line in the docs' operator table",
           layouts=("TODO(__op__): what it does with NCHW", "TODO(__op__): with channels_last",
                    "TODO(__op__): its result's memory format"))
def __op__(x: Tensor) -> Tensor:
    r"""TODO(__op__): its API page: what it computes, with the PyTorch function it stands in for.

    Args:
        x: TODO(__op__): its shape; float16, bfloat16, float32 or float64, on CPU or CUDA.

    Returns:
        TODO(__op__): its shape, dtype and memory format. Differentiable (twice) in x.
    """
    return torch.ops.customops.__op__(x)
