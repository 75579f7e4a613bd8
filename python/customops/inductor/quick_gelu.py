"""quick_gelu's decompositions: the kernels' formulas (kernels/quick_gelu.h) in ATen operations, computed in
the kernels' opmath type, so that Inductor fuses them with the operations around them."""

from __future__ import annotations

import torch

from ._common import opmath

OP = "quick_gelu"
ALPHA = 1.702
DECOMPOSED_BY_DEFAULT = True


def quick_gelu(x: torch.Tensor) -> torch.Tensor:
    xf = x.to(opmath(x.dtype))
    # x / (1 + exp(-a x)), not x * sigmoid(a x): very negative x gives -0, never inf * 0 (as the kernels).
    return (xf / (1 + torch.exp(-ALPHA * xf))).to(x.dtype)


def quick_gelu_backward(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    xf = x.to(opmath(x.dtype))
    s = 1 / (1 + torch.exp(-ALPHA * xf))
    return (grad_out.to(xf.dtype) * (s + ALPHA * xf * s * (1 - s))).to(x.dtype)


DECOMPOSITIONS = {"quick_gelu": quick_gelu, "quick_gelu_backward": quick_gelu_backward}
