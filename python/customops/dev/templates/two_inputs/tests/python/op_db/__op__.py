"""__op__: TODO(__op__): the op in a line."""

from __future__ import annotations

import torch
from torch.testing import make_tensor

import customops
from fuzz_common import batched

from ._common import ErrorInput, OpInfo, SampleInput, _other_device

ops = torch.ops.customops


def _reference(a, b):
    # The op in plain PyTorch as users write it, from its definition: not from the kernels' maths.
    raise NotImplementedError("TODO(__op__): the reference")


def _samples(device, dtype, requires_grad):
    def t(shape, low=-2, high=2, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=low, high=high, requires_grad=requires_grad, **kw)

    # yield SampleInput((t(a's shape), t(b's shape)), name=...): every size class the kernels treat apart, odd
    # sizes, empty, non-contiguous (t(shape, noncontiguous=True), a transpose), edge values.
    raise NotImplementedError("TODO(__op__): the samples")


def _dynamic_samples(device, dtype):
    # One structure in several sizes, no size shared by two dimensions (equal sizes would be one symbol in the
    # first graph and recompile).
    raise NotImplementedError("TODO(__op__): the dynamic-shape samples")


def _autocast_samples(device, low, requires_grad):
    # The inputs as torch.autocast gives them to the op (under AMP: activations in the low dtype `low` from a
    # Linear, parameters in float32), besides the float32 samples.
    raise NotImplementedError("TODO(__op__): the autocast samples")


def _errors(device):
    a, b = torch.randn(4, 6, device=device), torch.randn(4, 6, device=device)  # TODO(__op__): a valid a and b
    yield ErrorInput(SampleInput((a.long(), b)), r"expected a to be a floating-point tensor")
    yield ErrorInput(SampleInput((a, b.int())), r"expected b to be a floating-point tensor")
    yield ErrorInput(SampleInput((a, b.double())), r"expected b to have the dtype of a")
    g = torch.empty(ops.__op__(a.to("meta"), b.to("meta")).shape, device=device)
    yield ErrorInput(SampleInput((g.double(), a, b, [True, True])), r"expected grad_out to have the dtype of a",
                     backward=True)
    yield ErrorInput(SampleInput((g.flatten()[:0], a, b, [True, True])), r"expected grad_out of the result's shape",
                     backward=True)
    other = _other_device(device)
    if other is not None:
        yield ErrorInput(SampleInput((a, b.to(other))), r"expected b and a on the same device")
        yield ErrorInput(SampleInput((g.to(other), a, b, [True, True])), r"expected grad_out and a on the same",
                         backward=True)
    # a and b of wrong ranks or sizes and the op's arguments out of range, each message naming the argument.
    raise NotImplementedError("TODO(__op__): the bad inputs of the op's own checks")


def _cases(device):
    # A hypothesis strategy (@st.composite) drawing
    # strategies.Case("__op__", (draw(strategies.tensor_spec(a's shape)), draw(...)), {}, dtype,
    # mask=strategies._mask(draw, 2)), dtype drawn from strategies._dtype(device): the shapes drawn, in the
    # layouts tensor_spec draws.
    raise NotImplementedError("TODO(__op__): the property tests' inputs")


def _fuzz_call(rng, backward, device, dtype):
    batched(rng)  # drawn by every op's call, used or not: see fuzz_common.batched
    # Forward: [fuzz_common.T(a's shape, dtype, device), T(b's shape, ...)]; backward: [T(the result's shape, ...),
    # a, b, [a mask of two bools]].
    raise NotImplementedError("TODO(__op__): the fuzzer's arguments")


def _sharding(rnd):
    # (name, ops.__op__.default, args, placements in, placements out), from _common._placements(), tensors
    # rnd(*shape); the backward's too.
    raise NotImplementedError("TODO(__op__): the sharding cases")


__OP__ = OpInfo(
    name="__op__",
    op=customops.__op__,
    ref=_reference,
    sample_inputs=_samples,
    dynamic_samples=_dynamic_samples,
    error_inputs=_errors,
    module=lambda sample: (customops.__Op__(), sample.args),
    backward_args=lambda sample, grad: (grad, *sample.args, [True, True]),
    autocast_samples=_autocast_samples,  # the policy: autocast="input_dtype", as registration/__op__.cpp's
    cases=_cases,
    property_cost="TODO(__op__): the examples' cost relative to the cheapest op's, a number",
    fuzz_call=_fuzz_call,
    onnx_nodes=lambda s: [("TODO(__op__): the ONNX nodes on the path to the output", {})],
    sharding_cases=_sharding,
)

OPS = [__OP__]
