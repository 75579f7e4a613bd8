# scaffold: the op in a line | """quick_gelu: TODO."""
"""quick_gelu: x * sigmoid(1.702 x)."""
# scaffold-end

from __future__ import annotations

import customops
from customops.pointwise import quick_gelu as formulas

from ._pointwise import pointwise_opinfo

OPS = [pointwise_opinfo(
    formulas, op=customops.quick_gelu, module=customops.QuickGELU,
    # scaffold: the ONNX nodes on the path to the output | onnx_nodes=[("TODO", {})],
    onnx_nodes=[("Sigmoid", {}), ("Mul", {})],
    # scaffold-end
)]
