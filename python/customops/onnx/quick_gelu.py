"""quick_gelu -> its formula (customops.pointwise.quick_gelu) in ONNX nodes."""

from __future__ import annotations

from ..pointwise import quick_gelu as formulas
from ._common import TFloat
from ._pointwise import on_values, translation_text


def quick_gelu(x: TFloat) -> TFloat:
    # The kernels compute half types in float; so does the graph, for the same values rather than a float16
    # sigmoid.
    return on_values(formulas.forward, x)


TRANSLATIONS = {"quick_gelu": quick_gelu}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
DOC_ROWS = [("`quick_gelu`", f"`{translation_text(formulas.forward, 'x')}`")]
