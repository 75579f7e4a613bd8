"""quick_gelu: x * sigmoid(1.702 x)."""

from __future__ import annotations

import customops
from customops.benchmark.ops.quick_gelu import quick_gelu_reference
from customops.pointwise import quick_gelu as formulas

from ._pointwise import pointwise_opinfo

OPS = [pointwise_opinfo(formulas, op=customops.quick_gelu, module=customops.QuickGELU, reference=quick_gelu_reference,
                        onnx_nodes=[("Sigmoid", {}), ("Mul", {})])]
