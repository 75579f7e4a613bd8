"""__op__ -> TODO(__op__): the ONNX operators it becomes, in a paragraph."""

from __future__ import annotations

from ._common import TFloat


def __op__(x: TFloat) -> TFloat:
    # onnxscript (op.<ONNX operator>, from ._common), computed in the kernels' dtype: compute_dtype, to_compute.
    raise NotImplementedError("TODO(__op__): the translation")


TRANSLATIONS = {"__op__": __op__}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
DOC_ROWS = [
    ("`__op__`", "TODO(__op__): the ONNX operators it becomes"),
]
