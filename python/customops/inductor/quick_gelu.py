"""quick_gelu's decompositions: the kernels' formulas (kernels/quick_gelu.h) in ATen operations, computed in
the kernels' opmath type, so that Inductor fuses them with the operations around them."""

from __future__ import annotations

import torch

from ._common import opmath

OP = "quick_gelu"
# scaffold: the formulas' constants |
ALPHA = 1.702
# scaffold-end
DECOMPOSED_BY_DEFAULT = True


def quick_gelu(x: torch.Tensor) -> torch.Tensor:
    # scaffold: the forward in ATen operations, in opmath | raise NotImplementedError("TODO(quick_gelu)")
    xf = x.to(opmath(x.dtype))
    # x / (1 + exp(-a x)), not x * sigmoid(a x): very negative x gives -0, never inf * 0 (as the kernels).
    return (xf / (1 + torch.exp(-ALPHA * xf))).to(x.dtype)
    # scaffold-end


def quick_gelu_backward(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # scaffold: the gradient in ATen operations | raise NotImplementedError("TODO(quick_gelu)")
    xf = x.to(opmath(x.dtype))
    s = 1 / (1 + torch.exp(-ALPHA * xf))
    return (grad_out.to(xf.dtype) * (s + ALPHA * xf * s * (1 - s))).to(x.dtype)
    # scaffold-end


DECOMPOSITIONS = {"quick_gelu": quick_gelu, "quick_gelu_backward": quick_gelu_backward}


# This family's rows of the table in docs/design/compile.md, which the docs build reads from here (MyST
# Markdown): the op(s), what compiled graphs do with them, the measurement that made the choice, and why.
# scaffold: its rows of the docs' table | DOC_ROWS = [("`quick_gelu` (+ backward)", "decomposed", "TODO", "TODO")]
DOC_ROWS = [
    (
        "`quick_gelu` (+ backward)",
        "decomposed",
        "CLIP ViT-B MLP 64x197x768: bf16 0.98 / 1.04, float32 1.00 / 1.00",
        "an elementwise map: Inductor's code is as fast and fuses it with the bias add and the gradient's "
        "neighbours",
    ),
]
# scaffold-end
