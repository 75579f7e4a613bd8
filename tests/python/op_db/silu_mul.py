"""silu_mul: silu(a) * b."""

from __future__ import annotations

from torch.testing import make_tensor

import customops
from customops.benchmark.ops.silu_mul import silu_mul_reference
from customops.pointwise import silu_mul as formulas

from ._common import SampleInput
from ._pointwise import pointwise_opinfo


def _swiglu_halves(device, dtype, requires_grad):
    # SwiGLU's a and b: the two halves of one projection, slices of one tensor.
    both = make_tensor((6, 2 * 9), device=device, dtype=dtype, low=-8, high=8)
    yield SampleInput(tuple(h.detach().requires_grad_(requires_grad) for h in both.chunk(2, dim=-1)),
                      name="chunked_halves")


OPS = [pointwise_opinfo(formulas, op=customops.silu_mul, module=customops.SiluMul, reference=silu_mul_reference,
                        onnx_nodes=[("Sigmoid", {}), ("Mul", {})], ranges={"b": (-4, 4)},
                        extra_samples=_swiglu_halves)]
