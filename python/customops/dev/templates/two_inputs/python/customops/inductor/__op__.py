"""__op__'s decompositions into ATen operations: TODO(__op__): in a paragraph. Inductor generates code for them
where they are faster than the kernels (DECOMPOSED_BY_DEFAULT); litert-torch and ExecuTorch convert by them."""

from __future__ import annotations

import torch

OP = "__op__"
# Measured: docs/design/adding_an_operator.md.
DECOMPOSED_BY_DEFAULT = "TODO(__op__): True (decomposed) or False (kept whole), as measured"


def __op__(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Computed in the kernels' dtype (._common.opmath), the result in a's.
    raise NotImplementedError("TODO(__op__): the forward in ATen operations")


def __op___backward(grad_out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, output_mask):
    # (a's gradient, b's gradient), None where output_mask says.
    raise NotImplementedError("TODO(__op__): the backward in ATen operations")


DECOMPOSITIONS = {"__op__": __op__, "__op___backward": __op___backward}


# This family's rows of the table in docs/design/compile.md, which the docs build reads from here (MyST
# Markdown): the op(s), what compiled graphs do with them, the measurement that made the choice, and why.
DOC_ROWS = [
    ("`__op__` (+ backward)", "TODO(__op__): decomposed or kept whole", "TODO(__op__): the model, sizes and ratios",
     "TODO(__op__): why"),
]
