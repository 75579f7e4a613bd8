"""quick_gelu's decompositions: its formulas (customops.pointwise.quick_gelu) in ATen operations, computed in the
kernels' opmath type, so that Inductor fuses them with the operations around them."""

from __future__ import annotations

import torch

from ..pointwise import on_tensors
from ..pointwise import quick_gelu as formulas

OP = "quick_gelu"
DECOMPOSED_BY_DEFAULT = True


def quick_gelu(x: torch.Tensor) -> torch.Tensor:
    return on_tensors(formulas.forward, x)


def quick_gelu_backward(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return on_tensors(lambda m, x, g: g * formulas.derivative(m, x), x, grad_out)


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
