"""__op__: TODO(__op__): the op in a line."""

from __future__ import annotations

import torch
from torch.testing import make_tensor

import customops
from fuzz_common import batched

from ._common import ErrorInput, OpInfo, SampleInput, _other_device

ops = torch.ops.customops


def _reference(x):
    # The op in plain PyTorch as users write it, from its definition: not from the kernels' maths.
    raise NotImplementedError("TODO(__op__): the reference")


def _samples(device, dtype, requires_grad):
    def t(shape, low=-2, high=2, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=low, high=high, requires_grad=requires_grad, **kw)

    # yield SampleInput((t(shape),), name=...): every size class the kernels treat apart, odd sizes, empty,
    # non-contiguous (t(shape, noncontiguous=True), a transpose), edge values.
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
    x = torch.randn(4, 6, device=device)  # TODO(__op__): a valid x
    yield ErrorInput(SampleInput((x.long(),)), r"expected x to be a floating-point tensor")
    g = torch.empty(ops.__op__(x.to("meta")).shape, device=device)
    yield ErrorInput(SampleInput((g.double(), x)), r"expected grad_out to have the dtype of x", backward=True)
    yield ErrorInput(SampleInput((g.flatten()[:0], x)), r"expected grad_out of the result's shape", backward=True)
    other = _other_device(device)
    if other is not None:
        yield ErrorInput(SampleInput((g.to(other), x)), r"expected grad_out and x on the same device", backward=True)
    # x of a wrong rank or size and the op's arguments out of range, each message naming the argument.
    raise NotImplementedError("TODO(__op__): the bad inputs of the op's own checks")


def _cases(device):
    # A hypothesis strategy (@st.composite) drawing
    # strategies.Case("__op__", (draw(strategies.tensor_spec(shape)),), {}, dtype), dtype drawn from
    # strategies._dtype(device): the shapes drawn, in the layouts tensor_spec draws.
    raise NotImplementedError("TODO(__op__): the property tests' inputs")


def _fuzz_call(rng, backward, device, dtype):
    batched(rng)  # drawn by every op's call, used or not: see fuzz_common.batched
    # Forward: [fuzz_common.T(shape, dtype, device)]; backward: [T(the result's shape, dtype, device),
    # T(x's shape, dtype, device)].
    raise NotImplementedError("TODO(__op__): the fuzzer's arguments")


def _sharding(rnd):
    # (name, ops.__op__.default, args, placements in, placements out), from _common._placements(), tensors rnd(*shape).
    raise NotImplementedError("TODO(__op__): the sharding cases")


__OP__ = OpInfo(
    name="__op__",
    op=customops.__op__,
    ref=_reference,
    sample_inputs=_samples,
    dynamic_samples=_dynamic_samples,
    error_inputs=_errors,
    module=lambda sample: (customops.__Op__(), sample.args),
    backward_args=lambda sample, grad: (grad, *sample.args),
    autocast_samples=_autocast_samples,  # the policy: autocast="input_dtype", as registration/__op__.cpp's
    cases=_cases,
    property_cost="TODO(__op__): the examples' cost relative to the cheapest op's, a number",
    fuzz_call=_fuzz_call,
    onnx_nodes=lambda s: [("TODO(__op__): the ONNX nodes on the path to the output", {})],
    sharding_cases=_sharding,
)

OPS = [__OP__]
