"""torch.func transforms over every operator in op_db.OP_DB: each transform of
the op (grad, vjp, jacrev, jvp, jacfwd, vmap and their compositions, eager and
compiled) equals the same transform of the op's plain-PyTorch reference."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import func

from conftest import requires_cuda
from op_db import OP_DB, OpInfo, SampleInput

pytestmark = pytest.mark.torch_dependent

BATCH = 3  # vmapped batch size


def op_device_params():
    for op in OP_DB:
        yield pytest.param(op, "cpu", id=f"{op}-cpu")
        yield pytest.param(op, "cuda", marks=[requires_cuda], id=f"{op}-cuda")


def _samples(op: OpInfo, device, limit: int = 800, count: int = 2) -> list[SampleInput]:
    """A few small float64 samples with non-empty tensors, and the unbatched one
    (an op's unbatched form meets vmap's dimension differently); of another
    overload (op_db's SampleInput.overload), one of each set of keyword
    arguments it is given (each meets the transforms' rules differently)."""
    fits = [s for s in op.sample_inputs(device, torch.float64, False)
            if all(t.numel() > 0 and t.dim() > 0 for t in s.tensors())
            and sum(t.numel() for t in s.tensors()) <= limit]
    default = [s for s in fits if s.overload == "default"]
    picked = default[:count] + [s for s in default[count:] if "unbatched" in s.name]
    forms = {}
    for s in fits:
        if s.overload != "default":
            forms.setdefault((s.overload, frozenset(s.kwargs)), s)
    picked += forms.values()
    assert picked, f"{op}: no small sample"
    return picked


def _as_function(fn, sample: SampleInput):
    """fn with the sample's non-tensor arguments bound: f(*tensors) -> tensor."""
    slots = [i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor)]

    def f(*tensors):
        args = list(sample.args)
        for i, t in zip(slots, tensors):
            args[i] = t
        return fn(*args, **sample.kwargs)

    return f


def _pair(op: OpInfo, sample: SampleInput):
    """(op as f(*tensors), reference as f(*tensors), the tensors)."""
    return _as_function(op.op, sample), _as_function(op.ref, sample), tuple(sample.tensors())


def _close(op: OpInfo, actual, expected, what: str) -> None:
    rtol, atol = op.tolerances[torch.float64]
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def _loss(f, cotangent):
    return lambda *t: (f(*t) * cotangent).sum()


def _all(tensors) -> tuple[int, ...]:
    return tuple(range(len(tensors)))


def _batched(tensors, batch_size=BATCH):
    """Each tensor stacked with batch_size - 1 perturbed copies (dimension 0)."""
    return tuple(torch.stack([t] + [t + 0.25 * torch.randn_like(t) for _ in range(batch_size - 1)])
                 for t in tensors)


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_grad_and_vjp(op: OpInfo, device):
    for sample in _samples(op, device):
        f, ref, tensors = _pair(op, sample)
        cot = torch.randn_like(ref(*tensors))
        argnums = _all(tensors)
        _close(op, func.grad(_loss(f, cot), argnums)(*tensors), func.grad(_loss(ref, cot), argnums)(*tensors),
               f"{sample.name} grad")
        out, vjp_fn = func.vjp(f, *tensors)
        ref_out, ref_vjp_fn = func.vjp(ref, *tensors)
        _close(op, out, ref_out, f"{sample.name} vjp output")
        _close(op, vjp_fn(cot), ref_vjp_fn(cot), f"{sample.name} vjp")


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_jacrev_jacfwd_jvp(op: OpInfo, device):
    for sample in _samples(op, device, limit=600):
        f, ref, tensors = _pair(op, sample)
        argnums = _all(tensors)
        expected = func.jacrev(ref, argnums)(*tensors)
        _close(op, func.jacrev(f, argnums)(*tensors), expected, f"{sample.name} jacrev")
        _close(op, func.jacfwd(f, argnums)(*tensors), expected, f"{sample.name} jacfwd")
        tangents = tuple(torch.randn_like(t) for t in tensors)
        _close(op, func.jvp(f, tensors, tangents), func.jvp(ref, tensors, tangents), f"{sample.name} jvp")


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_second_order(op: OpInfo, device):
    """grad of grad (backward ops' gradients) and the Hessian by jacfwd(jacrev)
    (backward ops' tangents) of a scalar loss."""
    sample = _samples(op, device, limit=300, count=1)[0]
    f, ref, tensors = _pair(op, sample)
    cot = torch.randn_like(ref(*tensors))
    argnums = _all(tensors)
    v = tuple(torch.randn_like(t) for t in tensors)

    def grad_dot_v(loss):
        return lambda *t: sum((g * vi).sum() for g, vi in zip(func.grad(loss, argnums)(*t), v))

    _close(op, func.grad(grad_dot_v(_loss(f, cot)), argnums)(*tensors),
           func.grad(grad_dot_v(_loss(ref, cot)), argnums)(*tensors), f"{sample.name} grad of grad")
    _close(op, func.hessian(_loss(f, cot), argnums)(*tensors), func.hessian(_loss(ref, cot), argnums)(*tensors),
           f"{sample.name} hessian")


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_vmap(op: OpInfo, device):
    """vmap of the forward with every tensor batched, with only the first
    batched (shared weights, points, ...), and with the vmapped dimension last."""
    for sample in _samples(op, device):
        f, ref, tensors = _pair(op, sample)
        batched = _batched(tensors)
        _close(op, func.vmap(f)(*batched), func.vmap(ref)(*batched), f"{sample.name} all batched")
        first_only = (0,) + (None,) * (len(tensors) - 1)
        mixed = (batched[0], *tensors[1:])
        _close(op, func.vmap(f, first_only)(*mixed), func.vmap(ref, first_only)(*mixed),
               f"{sample.name} first batched")
        last = tuple(t.movedim(0, -1) for t in batched)
        _close(op, func.vmap(f, in_dims=-1, out_dims=-1)(*last), func.vmap(ref, in_dims=-1, out_dims=-1)(*last),
               f"{sample.name} batched last")


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_per_sample_gradients(op: OpInfo, device):
    """vmap(grad): per-sample gradients of every input, for batched inputs and
    for a batch of first inputs with shared other inputs (model parameters)."""
    for sample in _samples(op, device):
        f, ref, tensors = _pair(op, sample)
        cot = torch.randn_like(ref(*tensors))
        argnums = _all(tensors)
        batched = _batched(tensors)
        for in_dims, args in (((0,) * len(tensors), batched),
                              ((0,) + (None,) * (len(tensors) - 1), (batched[0], *tensors[1:]))):
            _close(op, func.vmap(func.grad(_loss(f, cot), argnums), in_dims)(*args),
                   func.vmap(func.grad(_loss(ref, cot), argnums), in_dims)(*args),
                   f"{sample.name} in_dims={in_dims}")


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_vmap_of_backward_op(op: OpInfo, device):
    """vmap over the registered <op>_backward (each overload's) equals calling it per sample."""
    for sample in _first_of_each_overload(op, device):
        grads = torch.randn(BATCH, *op.op(*sample.args, **sample.kwargs).shape, dtype=torch.float64, device=device)
        overload, args, kwargs = op.backward_call(sample, grads[0])
        in_dims = (0,) + (None,) * (len(args) - 1)

        def backward(g, *rest):
            return overload(g, *rest, **kwargs)

        # A gradient the mask leaves out is None, unbatched.
        probe = backward(grads[0], *args[1:])
        out_dims = tuple(None if p is None else 0 for p in probe) if isinstance(probe, tuple) else 0
        actual = func.vmap(backward, in_dims, out_dims=out_dims)(grads, *args[1:])
        for i in range(BATCH):
            expected = backward(grads[i], *args[1:])
            expected = expected if isinstance(expected, tuple) else (expected,)
            actual_i = actual if isinstance(actual, tuple) else (actual,)
            for a, e in zip(actual_i, expected):
                assert (a is None) == (e is None), f"{sample.name}: a masked gradient differs"
                if e is not None:
                    _close(op, a[i], e, f"{sample.name} backward sample {i}")


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_compiled(op: OpInfo, device):
    """grad, vmap and vmap(grad) compile without graph breaks (aot_eager: the
    transforms are traced by dynamo and AOTAutograd as with inductor, which adds
    only code generation and would take most of this file's time)."""
    for sample in _first_of_each_overload(op, device):
        f, ref, tensors = _pair(op, sample)
        cot = torch.randn_like(ref(*tensors))
        argnums = _all(tensors)
        batched = _batched(tensors)
        torch._dynamo.reset()
        for transform, args in ((lambda g: func.grad(_loss(g, cot), argnums), tensors),
                                (func.vmap, batched),
                                (lambda g: func.vmap(func.grad(_loss(g, cot), argnums)), batched)):
            compiled = torch.compile(transform(f), backend="aot_eager", fullgraph=True)
            _close(op, compiled(*args), transform(ref)(*args), f"{sample.name} compiled")


def _first_of_each_overload(op: OpInfo, device) -> list[SampleInput]:
    first = {}
    for s in _samples(op, device, count=1):
        first.setdefault(s.overload, s)
    return list(first.values())


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_functionalize(op: OpInfo):
    for sample in _first_of_each_overload(op, "cpu"):
        f, ref, tensors = _pair(op, sample)
        _close(op, func.functionalize(f)(*tensors), ref(*tensors), sample.name)


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_plain_autograd_keeps_the_cpp_function(op: OpInfo):
    """Outside transforms the C++ Autograd kernel records the graph, as for
    TorchScript and C++ callers."""
    sample = next(s for s in op.sample_inputs("cpu", torch.float64, True) if all(t.numel() for t in s.tensors()))
    out = op.op(*sample.args, **sample.kwargs)
    assert type(out.grad_fn).__name__ == "CppFunction", type(out.grad_fn)


def test_import_prints_no_warning():
    """The transform kernels are registered under a key of their own, so they
    override no kernel (PyTorch warns when one is overridden)."""
    result = subprocess.run([sys.executable, "-W", "error", "-c", "import customops"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "Warning" not in result.stderr, result.stderr
