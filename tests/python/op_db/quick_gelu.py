# scaffold: the op in a line | """quick_gelu: TODO."""
"""quick_gelu: x * sigmoid(1.702 x)."""
# scaffold-end

from __future__ import annotations

import torch
from hypothesis import strategies as st
from torch.testing import make_tensor

import customops
from customops.pointwise import TORCH
from customops.pointwise import quick_gelu as formulas
from fuzz_common import T, batched
from strategies import Case, _dtype, tensor_spec

from ._common import ErrorInput, OpInfo, SampleInput, _low_precision_first_input, _other_device, _placements

ops = torch.ops.customops


def _quick_gelu_ref(x: torch.Tensor) -> torch.Tensor:
    # The formula Inductor's decomposition, the ONNX translation and torch.func evaluate; the kernels are C++.
    return formulas.forward(TORCH, x)


def _quick_gelu_samples(device, dtype, requires_grad):
    def t(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=-8, high=8, requires_grad=requires_grad, **kw)

    yield SampleInput((t(()),), name="scalar")
    yield SampleInput((t((0,)),), name="empty")
    yield SampleInput((t((5, 0, 3)),), name="empty_3d")
    yield SampleInput((t((1,)),), name="one")
    yield SampleInput((t((7,)),), name="odd")
    yield SampleInput((t((3, 5)),), name="matrix")
    yield SampleInput((t((4, 6, 5), noncontiguous=True),), name="noncontiguous")
    yield SampleInput((t((9, 11)).t(),), name="transposed")
    yield SampleInput((t((2, 3, 5, 7)).to(memory_format=torch.channels_last),), name="channels_last")
    base = make_tensor((12, 9), device=device, dtype=dtype, low=-8, high=8)
    yield SampleInput((base[1:, 1:].detach().requires_grad_(requires_grad),), name="offset_slice")
    yield SampleInput((t((1, 7)).expand(3, 7),), name="expanded")
    # Many threads' worth on CPU, many blocks on CUDA, with a ragged tail.
    yield SampleInput((t((70001,)),), name="large_odd")
    large = torch.tensor([-1e4, -200.0, -90.0, -30.0, 30.0, 90.0, 200.0, 1e4], dtype=torch.float64)
    large = large.clamp(torch.finfo(dtype).min, torch.finfo(dtype).max).to(device, dtype)
    yield SampleInput((large.requires_grad_(requires_grad),), name="large_magnitude")


def _quick_gelu_dynamic(device, dtype):
    for n in (5, 17, 1000):
        yield SampleInput((make_tensor((n, 3), device=device, dtype=dtype, low=-4, high=4),), name=f"n{n}")


def _quick_gelu_errors(device):
    yield ErrorInput(SampleInput((torch.ones(3, dtype=torch.int64, device=device),)),
                     r"expected x to be a floating-point tensor .* got Long")
    yield ErrorInput(SampleInput((torch.ones(3, dtype=torch.bool, device=device),)),
                     r"expected x to be a floating-point tensor .* got Bool")
    x = torch.randn(4, 3, device=device)
    yield ErrorInput(SampleInput((torch.randn(3, 4, device=device), x)),
                     r"expected grad_out to have the shape of x", backward=True)
    yield ErrorInput(SampleInput((x.double(), x)), r"expected grad_out to have the dtype of x", backward=True)
    yield ErrorInput(SampleInput((x.long(), x)), r"expected grad_out to be a floating-point tensor",
                     backward=True)
    yield ErrorInput(SampleInput((x, x.long())), r"expected x to be a floating-point tensor", backward=True)
    # Found by test_fuzz.py: None for a tensor failed in autograd's bookkeeping ("tensor does not have a device"),
    # and an expanded tensor too large to make dense failed in at::empty; neither message named the argument.
    yield ErrorInput(SampleInput((x, None)), r"quick_gelu_backward: expected x to be a tensor, got None",
                     backward=True)
    yield ErrorInput(SampleInput((torch.zeros(1, dtype=torch.float16, device=device).expand(2**62),)),
                     r"quick_gelu: x of sizes \[4611686018427387904\] has more elements than a dense tensor can hold")
    other = _other_device(device)
    if other is not None:
        yield ErrorInput(SampleInput((x.to(other), x)), r"expected grad_out and x on the same device",
                         backward=True)


def _quick_gelu_module(sample):
    return customops.QuickGELU(), sample.args


@st.composite
def _quick_gelu_cases(draw, device):
    ndim = draw(st.integers(0, 4))
    if ndim == 1 and draw(st.booleans()):
        shape = (draw(st.integers(0, 600)),)  # vector bodies and ragged tails
    else:
        shape = tuple(draw(st.integers(0, 7)) for _ in range(ndim))
    scale = draw(st.sampled_from([4.0, 12.0, 100.0]))
    x = draw(tensor_spec(shape, -scale, scale))
    return Case("quick_gelu", (x,), {}, draw(_dtype(device)), grad_seed=draw(st.integers(0, 2**31 - 1)))


def _quick_gelu_fuzz_call(rng, backward, device, dtype):
    batched(rng)  # drawn by every op's call, used or not: see fuzz_common.batched
    shape = [rng.randint(0, 4) for _ in range(rng.randint(0, 4))]
    return [T(shape, dtype, device), T(shape, dtype, device)] if backward else [T(shape, dtype, device)]


def _quick_gelu_sharding(rnd):
    Shard, R, P = _placements()
    x = rnd(4, 6, 9, 8)
    yield "quick_gelu batch", ops.quick_gelu.default, (x,), [Shard(0)], [Shard(0)]
    yield "quick_gelu width", ops.quick_gelu.default, (x,), [Shard(3)], [Shard(3)]
    gx = rnd(4, 6, 9, 8)
    yield "quick_gelu_backward channels", ops.quick_gelu_backward.default, (gx, x), [Shard(1), Shard(1)], [Shard(1)]
    yield "quick_gelu_backward partial", ops.quick_gelu_backward.default, (gx, x), [P, R], [P]


QUICK_GELU = OpInfo(
    name="quick_gelu",
    op=customops.quick_gelu,
    ref=_quick_gelu_ref,
    sample_inputs=_quick_gelu_samples,
    dynamic_samples=_quick_gelu_dynamic,
    error_inputs=_quick_gelu_errors,
    module=_quick_gelu_module,
    backward_args=lambda sample, grad: (grad, sample.args[0]),
    autocast_samples=_low_precision_first_input(_quick_gelu_samples, 11),
    keeps_memory_format=True,
    keeps_dense_strides=True,
    cases=_quick_gelu_cases,
    property_cost=2.0,
    fuzz_call=_quick_gelu_fuzz_call,
    # scaffold: the ONNX nodes on the path to the output | onnx_nodes=lambda s: [("TODO", {})],
    onnx_nodes=lambda s: [("Sigmoid", {}), ("Mul", {})],
    # scaffold-end
    sharding_cases=_quick_gelu_sharding,
)

OPS = [QUICK_GELU]
