"""gelu_tanh_mul: gelu(a, approximate="tanh") * b."""

from __future__ import annotations

import customops
from customops.benchmark.ops.gelu_tanh_mul import gelu_tanh_mul_reference
from customops.pointwise import gelu_tanh_mul as formulas

from ._pointwise import pointwise_opinfo

# The reference is the plain-PyTorch calls the op replaces (the benchmark's baseline), written apart from the
# formulas: the tests hold the kernels' values and gradients, and the formulas, to it in float64.
OPS = [pointwise_opinfo(formulas, op=customops.gelu_tanh_mul, module=customops.GeluTanhMul,
                        reference=gelu_tanh_mul_reference,
                        onnx_nodes=[("Sigmoid", {}), ("Mul", {})], ranges={"b": (-4, 4)})]
