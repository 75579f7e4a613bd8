"""customops.inductor: the decompositions compiled graphs use in place of some ops.

Each decomposition must compute what the op's kernels compute (values and the output's layout) for every
OpInfo sample; a compiled graph must contain the op exactly when it is set not to be decomposed; and nothing
outside Inductor (eager, torch.export) may see a decomposition."""

from __future__ import annotations

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import customops
import customops.inductor as inductor
from conftest import HAS_CUDA
from op_db import OP_DB, OpInfo

pytestmark = pytest.mark.torch_dependent

DECOMPOSED_OPS = [op for op in OP_DB if op.name in inductor.decomposed()]
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])


def _family(op: OpInfo):
    return inductor._FAMILIES[op.name]


def _significant_strides(t: torch.Tensor) -> tuple:
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def _assert_same(got, want, op: OpInfo, dtype, what: str) -> None:
    rtol, atol = op.tolerances[dtype]
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        if w is None:
            assert g is None, what
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, what
        torch.testing.assert_close(g, w, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")
        if w.numel() > 0:
            assert _significant_strides(g) == _significant_strides(w), f"{what}: strides {g.stride()} {w.stride()}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", DECOMPOSED_OPS, ids=str)
def test_decompositions_compute_what_the_kernels_compute(op: OpInfo, device):
    table = _family(op).DECOMPOSITIONS
    for dtype in op.dtypes[device]:
        for sample in op.sample_inputs(device, dtype, False):
            # Keyed as customops.inductor's tables are: "op", "op.overload", "op_backward", "op_backward.overload".
            suffix = "" if sample.overload == "default" else f".{sample.overload}"
            out = op.overload_of(sample)(*sample.args, **sample.kwargs)
            # NotImplemented: the decomposition declines the call, and the traced graph keeps the op.
            got = table[op.name + suffix](*sample.args, **sample.kwargs)
            if got is not NotImplemented:
                _assert_same(got, out, op, dtype, f"{sample.name} {dtype}")
            backward = table.get(f"{op.name}_backward{suffix}")
            if backward is not None and out.numel() > 0:
                overload, args, kwargs = op.backward_call(sample, torch.randn_like(out))
                got = backward(*args, **kwargs)
                if got is not NotImplemented:
                    _assert_same(got, overload(*args, **kwargs), op, dtype, f"{sample.name} {dtype} (backward)")


def _compiled_code(op: OpInfo, sample) -> tuple[list[str], torch.Tensor, list[torch.Tensor]]:
    """The code Inductor generates for the op's forward and backward on `sample`, the compiled output and
    the gradients of its floating inputs."""
    torch._dynamo.reset()
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in sample.tensors()]

    def args(tensors):
        it = iter(tensors)
        return tuple(next(it) if isinstance(a, torch.Tensor) else a for a in sample.args)

    compiled = torch.compile(lambda *a: op.overload(*a, **sample.kwargs), fullgraph=True)

    def step():
        out = compiled(*args(inputs))
        return out, torch.autograd.grad(out.square().sum(), [t for t in inputs if t.requires_grad])

    (out, grads), code = run_and_get_code(step)
    return code, out, list(grads)


@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "kept"])
@pytest.mark.parametrize("op", DECOMPOSED_OPS, ids=str)
def test_compiled_graphs_decompose_only_what_is_set(op: OpInfo, decompose):
    sample = next(s for s in op.sample_inputs("cpu", torch.float32, False) if s.tensors()[0].numel() > 8)
    before = inductor.decomposed()[op.name]
    inductor.set_decomposed(op.name, decompose)
    try:
        # The compile caches key a graph without the choice (customops.inductor.set_decomposed says so).
        with torch._inductor.config.patch(force_disable_caches=True):
            code, out, grads = _compiled_code(op, sample)
    finally:
        inductor.set_decomposed(op.name, before)
        torch._dynamo.reset()
    calls = "\n".join(code)
    # A family whose decompositions keep the op where customops' kernels run (all of them on the CPU) calls it
    # either way; its own tests check what changes around it.
    keeps = getattr(_family(op), "KEEPS_THE_OP", False)
    forward_op = f"torch.ops.customops.{op.name}.default("
    assert (forward_op in calls) != (decompose and not keeps), calls[-2000:]
    backward_decomposed = decompose and not keeps and op.name + "_backward" in _family(op).DECOMPOSITIONS
    assert (f"torch.ops.customops.{op.name}_backward.default(" in calls) != backward_decomposed
    # And the compiled results are the op's.
    inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in sample.tensors()]
    it = iter(inputs)
    want = op.overload(*(next(it) if isinstance(a, torch.Tensor) else a for a in sample.args), **sample.kwargs)
    want_grads = torch.autograd.grad(want.square().sum(), [t for t in inputs if t.requires_grad])
    torch.testing.assert_close(out, want)
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("op", DECOMPOSED_OPS, ids=str)
def test_export_keeps_the_op_whatever_inductor_does(op: OpInfo):
    sample = next(s for s in op.sample_inputs("cpu", torch.float32, False) if s.tensors()[0].numel() > 0)
    module, inputs = op.module(sample)
    targets = [n.target for n in torch.export.export(module, tuple(inputs)).graph.nodes]
    assert op.overload in targets, targets


def test_unknown_op_is_refused():
    with pytest.raises(ValueError, match="no decomposition for op 'conv2d'"):
        inductor.set_decomposed("conv2d", True)


@pytest.mark.every_op
def test_decompositions_join_inductor_when_it_loads(tmp_path):
    # A fresh process: importing customops must not import Inductor, and the decompositions must be in
    # Inductor's table as soon as it is imported.
    import os
    import subprocess
    import sys

    code = ("import sys, torch, customops\n"
            "assert 'torch._inductor.decomposition' not in sys.modules, 'import customops imported Inductor'\n"
            "from torch._inductor.decomposition import decompositions, select_decomp_table\n"
            "ops = [torch.ops.customops.quick_gelu.default, torch.ops.customops.upsample_bilinear2d.default]\n"
            "assert all(op in decompositions and op in select_decomp_table() for op in ops)\n"
            "assert torch.ops.customops.conv2d.default not in decompositions\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr


def test_deterministic_algorithms_compile_a_resize_with_its_backward_in_a_fresh_process(tmp_path):
    # The backward decomposition declines under deterministic algorithms, leaving the op in a graph while it is in
    # Inductor's decomposition table: its fallback must be there before any other graph has made one.
    import os
    import subprocess
    import sys

    code = ("import torch, customops\n"
            "torch.use_deterministic_algorithms(True)\n"
            "model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1),\n"
            "                            customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode='asymmetric'))\n"
            "x = torch.randn(2, 3, 8, 8, requires_grad=True)\n"
            "torch.compile(model, fullgraph=True)(x).square().sum().backward()\n"
            "want = torch.autograd.grad(model(x).square().sum(), x)[0]\n"
            "torch.testing.assert_close(x.grad, want)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TORCHINDUCTOR_FORCE_DISABLE_CACHES="1")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]


@pytest.mark.parametrize("op", [op for op in DECOMPOSED_OPS if op.atomic_backward_decomposition], ids=str)
def test_deterministic_algorithms_keep_the_backward_op(op: OpInfo):
    # The decomposed backward adds with atomics; torch.use_deterministic_algorithms(True) must keep our kernel,
    # while the forward stays decomposed.
    sample = next(s for s in op.sample_inputs("cpu", torch.float32, False) if s.tensors()[0].numel() > 8)
    before, decomposed = torch.are_deterministic_algorithms_enabled(), inductor.decomposed()[op.name]
    torch.use_deterministic_algorithms(True)
    inductor.set_decomposed(op.name, True)
    try:
        with torch._inductor.config.patch(force_disable_caches=True):
            code, _, _ = _compiled_code(op, sample)
    finally:
        inductor.set_decomposed(op.name, decomposed)
        torch.use_deterministic_algorithms(before)
        torch._dynamo.reset()
    calls = "\n".join(code)
    assert f"torch.ops.customops.{op.name}_backward.default(" in calls
    assert f"torch.ops.customops.{op.name}.default(" not in calls


@pytest.mark.every_op
def test_litert_borrows_each_op_decomposition_once():
    # customops.litert takes the Inductor decomposition of a family it has no module of, matched by the family's
    # module name: an Inductor module named otherwise than the family would give litert-torch a second
    # decomposition of the op, which would replace its own.
    from customops import litert

    owners: dict = {}
    for family in litert.families():
        for name in family.DECOMPOSITIONS:
            assert name not in owners, f"{name}: decomposed by {owners[name]} and {family.__name__}"
            owners[name] = family.__name__
