"""The OpInfo of a pointwise op (customops.pointwise), made from its formulas: what every such op is tested with
(layouts, sizes, large magnitudes, bad inputs, property strategies, fuzz calls, sharding cases), with the inputs
named as the op names them. A family's module gives what is its own: its reference, the module, the ONNX nodes,
value ranges and extra samples. An op's scalar arguments (its formulas' ``ARGS``) follow its tensors in every call:
each sample takes their first valid values (the defaults), further samples each other valid value, the error
inputs each value out of range, the property and fuzz calls any valid one.

The reference is the op in PyTorch's own functions (``F.silu(a) * b``), written apart from the family's formulas
(customops.pointwise), which the kernels' C++ copy mirrors: the kernels' values and gradients are held to it in
float64 (test_ops.py, test_func.py, test_properties.py), and so are the formulas (test_pointwise.py), so that one
formula wrong in both languages fails."""

from __future__ import annotations

from types import ModuleType
from typing import Callable, Iterable, Optional

import torch
from hypothesis import strategies as st
from torch.testing import make_tensor

from fuzz_common import T, batched
from strategies import Case, _dtype, tensor_spec

from customops.pointwise import args_of

from ._common import ErrorInput, OpInfo, SampleInput, _low_precision_first_input, _other_device, _placements

ops = torch.ops.customops


def pointwise_opinfo(formulas: ModuleType, *, op: Callable, module: type, reference: Callable, onnx_nodes: list,
                     ranges: Optional[dict] = None,
                     extra_samples: Optional[Callable[[str, torch.dtype, bool], Iterable[SampleInput]]] = None,
                     **kwargs) -> OpInfo:
    """`reference(*inputs)`: the op in PyTorch's functions; `ranges`: input name -> (low, high) of its sample
    values (default -8, 8); `extra_samples(device, dtype, requires_grad)`: the op's own samples; `kwargs`: any other
    OpInfo field."""
    name, inputs, args = formulas.__name__.rpartition(".")[2], formulas.INPUTS, args_of(formulas)
    n, ranges = len(inputs), ranges or {}
    given = tuple(a.valid_values()[0] for a in args)  # the scalar arguments of every call but those that vary them

    def make(i, shape, device, dtype, requires_grad, **kw):
        low, high = ranges.get(inputs[i], (-8, 8))
        return make_tensor(shape, device=device, dtype=dtype, low=low, high=high, requires_grad=requires_grad, **kw)

    def samples(device, dtype, requires_grad):
        def alike(sample_name, shape, first=None, **kw):
            """Every input of `shape`; `first`, where given, maps the first input's tensor (its layout)."""
            xs = [make(i, shape, device, dtype, requires_grad and (i > 0 or first is None), **kw) for i in range(n)]
            if first is not None:
                xs[0] = first(xs[0].detach()).requires_grad_(requires_grad) if requires_grad else first(xs[0])
            return SampleInput((*xs, *given), name=sample_name)

        yield alike("scalar", ())
        yield alike("empty", (0,))
        yield alike("empty_3d", (5, 0, 3))
        yield alike("one", (1,))
        yield alike("odd", (7,))
        yield alike("matrix", (3, 5))
        yield alike("noncontiguous", (4, 6, 5), noncontiguous=True)
        yield alike("transposed", (9, 11), first=lambda x: make(0, (11, 9), device, dtype, False).t())
        yield alike("channels_last", (2, 3, 5, 7), first=lambda x: x.contiguous(memory_format=torch.channels_last))
        yield alike("offset_slice", (11, 8), first=lambda x: make(0, (12, 9), device, dtype, False)[1:, 1:])
        yield alike("expanded", (3, 7), first=lambda x: x[:1].expand(3, 7))
        yield alike("large_odd", (70001,))  # many threads' worth on CPU, many blocks on CUDA, a ragged tail
        large = torch.tensor([-1e4, -200.0, -90.0, -30.0, 30.0, 90.0, 200.0, 1e4], dtype=torch.float64)
        large = large.clamp(torch.finfo(dtype).min, torch.finfo(dtype).max).to(device, dtype)
        others = [make_tensor((8,), device=device, dtype=dtype, low=-1, high=1, requires_grad=requires_grad)
                  for _ in range(n - 1)]  # |x| <= 1, so that products with the large first input stay finite
        yield SampleInput((large.requires_grad_(requires_grad), *others, *given), name="large_magnitude")
        for k, arg in enumerate(args):  # each other valid value of each argument, the others at theirs
            for value in arg.valid_values()[1:]:
                xs = [make(i, (3, 5), device, dtype, requires_grad) for i in range(n)]
                values = (*given[:k], value, *given[k + 1:])
                yield SampleInput((*xs, *values), name=f"{arg.name}={value}")
        if extra_samples is not None:
            yield from extra_samples(device, dtype, requires_grad)

    def dynamic(device, dtype):
        for size in (5, 17, 1000):
            yield SampleInput((*(make(i, (size, 3), device, dtype, False) for i in range(n)), *given),
                              name=f"n{size}")

    def autocast_samples(device, low, requires_grad):
        yield from _low_precision_first_input(samples, 11)(device, low, requires_grad)
        if n > 1:  # promoted, as a * b
            xs = [make(i, (4, 6), device, low if i == 0 else torch.float32, requires_grad) for i in range(n)]
            yield SampleInput((*xs, *given), name=f"mixed_{low}_float32")

    def errors(device):
        yield from (ErrorInput(SampleInput((*e.sample.args, *given)), e.match, e.error, e.backward)
                    for e in tensor_errors(device))
        x = torch.randn(4, 3, device=device)
        for k, arg in enumerate(args):  # refused with the argument's name, by the op and by its backward op
            for value in arg.invalid_values():
                values = (*given[:k], value, *given[k + 1:])
                match = rf"{name}: expected {arg.name} .*got {arg.name}=" if arg.type != "choice" else \
                    rf"{name}: expected {arg.name} to be one of"
                yield ErrorInput(SampleInput((x,) * n + values), match)
                yield ErrorInput(SampleInput((x,) * (n + 1) + values), match.replace(name, f"{name}_backward", 1),
                                 backward=True)

    def tensor_errors(device):
        x = torch.randn(4, 3, device=device)
        first, last = inputs[0], inputs[-1]
        rest = (x,) * (n - 1)
        yield ErrorInput(SampleInput((x.long(), *rest)), rf"expected {first} to be a floating-point tensor .* got Long")
        yield ErrorInput(SampleInput((x.bool(), *rest)), rf"expected {first} to be a floating-point tensor .* got Bool")
        if n > 1:
            yield ErrorInput(SampleInput((x,) * (n - 1) + (x.double(),)),
                             rf"{name}: expected {last} to have the dtype of {first}")
            yield ErrorInput(SampleInput((x,) * (n - 1) + (x[:, :2],)),
                             rf"{name}: expected {last} to have the shape of {first}")
        yield ErrorInput(SampleInput((torch.randn(3, 4, device=device), x, *rest)),
                         rf"expected grad_out to have the shape of {first}", backward=True)
        yield ErrorInput(SampleInput((x.double(), x, *rest)), rf"expected grad_out to have the dtype of {first}",
                         backward=True)
        yield ErrorInput(SampleInput((x.long(), x, *rest)), r"expected grad_out to be a floating-point tensor",
                         backward=True)
        yield ErrorInput(SampleInput((x, x.long(), *rest)), rf"expected {first} to be a floating-point tensor",
                         backward=True)
        # Found by test_fuzz.py: None for a tensor failed in autograd's bookkeeping ("tensor does not have a
        # device"), and an expanded tensor too large to make dense failed in at::empty; neither message named it.
        yield ErrorInput(SampleInput((x,) * n + (None,)), rf"{name}_backward: expected {last} to be a tensor, got None",
                         backward=True)
        big = torch.zeros(1, dtype=torch.float16, device=device).expand(2**62)
        yield ErrorInput(SampleInput((big,) * n), rf"{name}: {first} of sizes \[4611686018427387904\] has more "
                         "elements than a dense tensor can hold")
        other = _other_device(device)
        if other is not None:
            yield ErrorInput(SampleInput((x.to(other), x, *rest)), rf"expected grad_out and {first} on the same device",
                             backward=True)

    @st.composite
    def cases(draw, device):
        ndim = draw(st.integers(0, 4))
        if ndim == 1 and draw(st.booleans()):
            shape = (draw(st.integers(0, 600)),)  # vector bodies and ragged tails
        else:
            shape = tuple(draw(st.integers(0, 7)) for _ in range(ndim))
        scales = [draw(st.sampled_from([4.0, 12.0, 100.0])) if i == 0 else 4.0 for i in range(n)]
        xs = tuple(draw(tensor_spec(shape, -s, s)) for s in scales)
        values = tuple(draw(st.sampled_from(a.valid_values())) for a in args)
        return Case(name, xs + values, {}, draw(_dtype(device)), grad_seed=draw(st.integers(0, 2**31 - 1)))

    def fuzz_call(rng, backward, device, dtype):
        batched(rng)  # drawn by every op's call, used or not: see fuzz_common.batched
        shape = [rng.randint(0, 4) for _ in range(rng.randint(0, 4))]
        return [T(shape, dtype, device) for _ in range(n + 1 if backward else n)] + \
            [rng.choice(a.valid_values()) for a in args]

    def sharding(rnd):
        Shard, R, P = _placements()
        forward, backward = getattr(ops, name).default, getattr(ops, f"{name}_backward").default
        xs = tuple(rnd(4, 6, 9, 8) for _ in range(n))
        yield f"{name} batch", forward, (*xs, *given), [Shard(0)] * n, [Shard(0)]
        yield f"{name} width", forward, (*xs, *given), [Shard(3)] * n, [Shard(3)]
        g = rnd(4, 6, 9, 8)
        yield f"{name}_backward channels", backward, (g, *xs, *given), [Shard(1)] * (n + 1), [Shard(1)] * n
        yield f"{name}_backward partial", backward, (g, *xs, *given), [P] + [R] * n, [P] * n

    fields = dict(
        name=name, op=op, ref=reference, sample_inputs=samples,
        dynamic_samples=dynamic, error_inputs=errors, module=lambda sample: (module(*sample.args[n:]), sample.args[:n]),
        backward_args=lambda sample, grad: (grad, *sample.args), autocast="input_dtype" if n == 1 else "promote",
        autocast_samples=autocast_samples, keeps_memory_format=True, keeps_dense_strides=True, cases=cases,
        property_cost=2.0, fuzz_call=fuzz_call, onnx_nodes=lambda sample: onnx_nodes, sharding_cases=sharding)
    return OpInfo(**{**fields, **kwargs})
