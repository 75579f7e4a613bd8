"""silu_mul: silu(a) * b."""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from torch.testing import make_tensor

import customops
from customops.pointwise import TORCH
from customops.pointwise import silu_mul as formulas
from fuzz_common import T, batched
from strategies import Case, _dtype, tensor_spec

from ._common import ErrorInput, OpInfo, SampleInput, _low_precision_first_input, _other_device, _placements

ops = torch.ops.customops


def _silu_mul_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # The formula Inductor's decomposition, the ONNX translation and torch.func evaluate; the kernels are C++.
    return formulas.forward(TORCH, a, b)


def _silu_mul_samples(device, dtype, requires_grad):
    def t(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=-8, high=8, requires_grad=requires_grad, **kw)

    def pair(name, shape, **kw):
        return SampleInput((t(shape, **kw), t(shape, **kw)), name=name)

    yield pair("scalar", ())
    yield pair("empty", (0,))
    yield pair("empty_3d", (5, 0, 3))
    yield pair("odd", (7,))
    yield pair("matrix", (3, 5))
    yield pair("noncontiguous", (4, 6, 5), noncontiguous=True)
    yield SampleInput((t((9, 11)).t(), t((11, 9))), name="transposed_and_contiguous")
    yield SampleInput((t((2, 3, 5, 7)).to(memory_format=torch.channels_last),
                       t((2, 3, 5, 7)).to(memory_format=torch.channels_last)), name="channels_last")
    # SwiGLU's a and b: the two halves of one projection, slices of one tensor.
    both = make_tensor((6, 2 * 9), device=device, dtype=dtype, low=-8, high=8)
    a, b = (h.detach().requires_grad_(requires_grad) for h in both.chunk(2, dim=-1))
    yield SampleInput((a, b), name="chunked_halves")
    yield SampleInput((t((1, 7)).expand(3, 7), t((3, 7))), name="expanded")
    yield pair("large_odd", (70001,))  # many threads' worth on CPU, many blocks on CUDA, a ragged tail
    large = torch.tensor([-1e4, -200.0, -90.0, -30.0, 30.0, 90.0, 200.0, 1e4], dtype=torch.float64)
    large = large.clamp(torch.finfo(dtype).min, torch.finfo(dtype).max).to(device, dtype)
    b = make_tensor((8,), device=device, dtype=dtype, low=-1, high=1, requires_grad=requires_grad)
    yield SampleInput((large.requires_grad_(requires_grad), b), name="large_magnitude")


def _silu_mul_autocast(device, low, requires_grad):
    yield from _low_precision_first_input(_silu_mul_samples, 11)(device, low, requires_grad)
    a = make_tensor((4, 6), device=device, dtype=low, low=-4, high=4, requires_grad=requires_grad)
    b = make_tensor((4, 6), device=device, dtype=torch.float32, low=-4, high=4, requires_grad=requires_grad)
    yield SampleInput((a, b), name=f"mixed_{low}_float32")  # promoted, as a * b


def _silu_mul_dynamic(device, dtype):
    for n in (5, 17, 1000):
        yield SampleInput(tuple(make_tensor((n, 3), device=device, dtype=dtype, low=-4, high=4) for _ in "ab"),
                          name=f"n{n}")


def _silu_mul_errors(device):
    x = torch.randn(4, 3, device=device)
    yield ErrorInput(SampleInput((x.long(), x)), r"expected a to be a floating-point tensor .* got Long")
    yield ErrorInput(SampleInput((x, x.bool())), r"expected b to be a floating-point tensor .* got Bool")
    yield ErrorInput(SampleInput((x, x.double())), r"silu_mul: expected b to have the dtype of a")
    yield ErrorInput(SampleInput((x, x[:, :2])), r"silu_mul: expected b to have the shape of a")
    yield ErrorInput(SampleInput((torch.randn(3, 4, device=device), x, x)), r"expected grad_out to have the shape of a",
                     backward=True)
    yield ErrorInput(SampleInput((x.double(), x, x)), r"expected grad_out to have the dtype of a", backward=True)
    yield ErrorInput(SampleInput((x.long(), x, x)), r"expected grad_out to be a floating-point tensor", backward=True)
    yield ErrorInput(SampleInput((x, x, None)), r"silu_mul_backward: expected b to be a tensor, got None",
                     backward=True)
    yield ErrorInput(SampleInput((x, None)), r"silu_mul: expected b to be a tensor, got None")
    big = torch.zeros(1, dtype=torch.float16, device=device).expand(2**62)
    yield ErrorInput(SampleInput((big, big)),
                     r"silu_mul: a of sizes \[4611686018427387904\] has more elements than a dense tensor can hold")
    other = _other_device(device)
    if other is not None:
        yield ErrorInput(SampleInput((x, x.to(other))), r"expected b and a on the same device")


def _silu_mul_module(sample):
    return customops.SiluMul(), sample.args


@st.composite
def _silu_mul_cases(draw, device):
    ndim = draw(st.integers(0, 4))
    if ndim == 1 and draw(st.booleans()):
        shape = (draw(st.integers(0, 600)),)  # vector bodies and ragged tails
    else:
        shape = tuple(draw(st.integers(0, 7)) for _ in range(ndim))
    scale = draw(st.sampled_from([4.0, 12.0, 100.0]))
    a, b = draw(tensor_spec(shape, -scale, scale)), draw(tensor_spec(shape, -4.0, 4.0))
    return Case("silu_mul", (a, b), {}, draw(_dtype(device)), grad_seed=draw(st.integers(0, 2**31 - 1)))


def _silu_mul_fuzz_call(rng, backward, device, dtype):
    batched(rng)  # drawn by every op's call, used or not: see fuzz_common.batched
    shape = [rng.randint(0, 4) for _ in range(rng.randint(0, 4))]
    return [T(shape, dtype, device) for _ in range(3 if backward else 2)]


def _silu_mul_sharding(rnd):
    Shard, R, P = _placements()
    a, b = rnd(4, 6, 9, 8), rnd(4, 6, 9, 8)
    yield "silu_mul batch", ops.silu_mul.default, (a, b), [Shard(0), Shard(0)], [Shard(0)]
    yield "silu_mul width", ops.silu_mul.default, (a, b), [Shard(3), Shard(3)], [Shard(3)]
    g = rnd(4, 6, 9, 8)
    yield ("silu_mul_backward channels", ops.silu_mul_backward.default, (g, a, b), [Shard(1)] * 3,
           [Shard(1), Shard(1)])
    yield "silu_mul_backward partial", ops.silu_mul_backward.default, (g, a, b), [P, R, R], [P, P]


SILU_MUL = OpInfo(
    name="silu_mul",
    op=customops.silu_mul,
    ref=_silu_mul_ref,
    sample_inputs=_silu_mul_samples,
    dynamic_samples=_silu_mul_dynamic,
    error_inputs=_silu_mul_errors,
    module=_silu_mul_module,
    backward_args=lambda sample, grad: (grad, *sample.args),
    autocast="promote",
    autocast_samples=_silu_mul_autocast,
    keeps_memory_format=True,
    keeps_dense_strides=True,
    cases=_silu_mul_cases,
    property_cost=2.0,
    fuzz_call=_silu_mul_fuzz_call,
    onnx_nodes=lambda s: [("Sigmoid", {}), ("Mul", {})],
    sharding_cases=_silu_mul_sharding,
)

OPS = [SILU_MUL]
