"""Property-based tests: every customops operator and its registered backward
op against the plain-PyTorch references of op_db, on random calls drawn by
each OpInfo's ``cases`` (from the pieces in strategies.py: shapes with empty
and unit extents, batch, channels, windows, padding including "same", groups
and channel multipliers, output sizes up and down, coordinate modes, dtypes,
and layouts: contiguous, channels_last, strided and offset slices, transposes,
stride-0 expansions).

- test_forward: the op in the drawn dtype against the reference in float64 on
  the same rounded values (op_db's tolerances), and the result's dtype, device
  and memory format.
- test_gradients: gradients through autograd (the op's registered backward),
  in float64 on the CPU (on CUDA in the drawn dtype: the fast kernels take no
  float64), against autograd through the reference.
- test_backward_op: customops::<op>_backward called directly, in the drawn
  dtype, with a random output_mask, against the reference's vector-Jacobian
  product.
- test_cuda_kernel_family: per CUDA kernel, cases inside the rules that pick
  it (strategies.CUDA_FAMILIES); each family's run must reach its kernels.

Settings profiles: strategies.py (CUSTOMOPS_HYPOTHESIS_PROFILE=ci|long). A
falsifying example found here belongs, once understood, in op_db (its family's
module) as a named sample of its op, where every generic test then runs it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense

import strategies as S
from conftest import cuda_kernel_names, requires_cuda
from op_db import OP_DB, OpInfo, SampleInput

pytestmark = pytest.mark.torch_independent

OPS: dict[str, OpInfo] = {op.name: op for op in OP_DB}
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
TF32_TOLERANCE = (5e-3, 5e-3)  # 10-bit mantissas: about 2^-11 a product


# --- building a case's tensors ----------------------------------------------------------------------------------


class Built:
    """A case's arguments on a device: `sample` (what the op is called with),
    `leaves` (the dense tensors its tensor arguments are views of) and `views`."""

    def __init__(self, case: S.Case, device, dtype=None, requires_grad=False, uniform=False, like=None):
        dtype = dtype if like is not None else dtype or case.dtype
        self.leaves, self.views, args = [], [], []
        sources = iter(like.leaves) if like is not None else None
        for a in case.args:
            if not isinstance(a, S.TensorSpec):
                args.append(a)
                continue
            if sources is not None:  # a reference's: the same rounded values on the CPU (dtype None: as they are)
                source = next(sources).detach()
                leaf = source.to("cpu", dtype or source.dtype)
            else:
                leaf = (replace(a, dtype=None) if uniform else a).leaf(dtype, device)
            leaf.requires_grad_(requires_grad)
            view = a.view(leaf)
            self.leaves.append(leaf)
            self.views.append(view)
            args.append(view)
        self.sample = SampleInput(tuple(args), dict(case.kwargs), repr(case))

    def reference(self, case: S.Case, requires_grad=False, dtype=torch.float64) -> "Built":
        """The reference's arguments: float64, or (dtype None) each in the dtype the op got."""
        return Built(case, "cpu", dtype, requires_grad, like=self)


def _call(op: OpInfo, sample: SampleInput):
    return op.op(*sample.args, **sample.kwargs)


def _reference(op: OpInfo, sample: SampleInput):
    return op.ref(*sample.args, **sample.kwargs)


def _grad_like(out: torch.Tensor, seed: int) -> torch.Tensor:
    """A gradient for out: seeded values, in out's dtype, device and strides (as the next layer's would be)."""
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(out.shape, generator=g, dtype=torch.float64)
    return torch.empty_like(out).copy_(values)


def _tolerance(op: OpInfo, case: S.Case, dtype=None):
    """(rtol, atol) for the case in dtype (the case's by default): the op's, or TF32's, as the op's
    property_tolerance adjusts them to the case."""
    dtype = dtype or case.dtype
    rtol, atol = TF32_TOLERANCE if case.tf32 and dtype == torch.float32 else op.tolerances[dtype]
    if op.property_tolerance is not None:
        rtol, atol = op.property_tolerance(case, dtype, (rtol, atol))
    return rtol, atol


def _term_scales(op: OpInfo, ref: "Built", grad: torch.Tensor, wrt="leaves") -> list:
    """Per argument, the size of the largest terms its gradient sums, where the result can be far smaller (None:
    the result's own size will do): the op's gradient_term_scales, for the gradients of the views or, as a leaf's
    gradient sums its expanded view's over the copies, of the leaves."""
    if op.gradient_term_scales is None:
        return [None] * len(ref.views)
    scales = op.gradient_term_scales(ref.views, grad)
    if wrt == "leaves":
        scales = [None if s is None else s * (view.numel() / max(1, leaf.numel()))
                  for s, view, leaf in zip(scales, ref.views, ref.leaves)]
    return scales


def _close(got, want, rtol, atol, what, peer=None, scale=None):
    """got (any device, any dtype) against the float64 reference `want`; atol is relative to the reference's
    largest magnitude (at least 1): sums of many products carry errors of the size of their largest terms. Where
    a sum cancels (a result far smaller than its terms), rounding errors of the terms' size are no fault: `peer`,
    the reference evaluated in the op's dtype, measures what that dtype allows, and a result at most 4 times
    further from `want` than `peer` (at worst) passes too."""
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    scale = max(1.0, scale or 0.0, want.abs().max().item() if want.numel() else 0.0)
    got, want = got.detach().cpu().double(), want.detach()
    try:
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol * scale, equal_nan=True,
                                   msg=lambda m: f"{what}: {m}")
    except AssertionError:
        if peer is None or want.numel() == 0:
            raise
        error = (got - want).abs().max().item()
        allowed = 4 * (peer.detach().double() - want).abs().max().item() + atol
        if not error <= allowed:
            raise


def _strictly_channels_last(t):
    return t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


@contextlib.contextmanager
def _environment(case: S.Case):
    """The case's environment variables and TF32 flag for the duration of a call."""
    old_env = {k: os.environ.get(k) for k in case.env}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    os.environ.update(case.env)
    torch.backends.cuda.matmul.allow_tf32 = case.tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _without_onednn():
    """PyTorch's CPU convolutions off oneDNN (to its own kernels) for the duration: torch 2.11's oneDNN brgemm
    convolution crashes (SIGSEGV in perform_outwork) on some small shapes, now and then, in float32 and float16 alike,
    e.g. F.conv2d(x, w, b, (3, 2), (2, 3), (1, 2), 2) with x 3x6x2x1 and w 6x3x1x2 in float16 within 3000 calls. The
    references in the ops' own dtypes would take it; float64 never does. (torch.backends.mkldnn.flags() would do the
    same, with a warning about oneDNN's TF32 at each use.)"""
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = enabled


# --- the properties -------------------------------------------------------------------------------------------------


def _evaluate(op: OpInfo, case: S.Case, built: Built, dtype, grad=None, wrt="leaves", count=None):
    """The reference on built's values in `dtype` (None: the op's dtypes) on the CPU, and with a gradient of its
    output, its vector-Jacobian product with respect to the leaves or the views (the first `count`)."""
    ref = built.reference(case, requires_grad=grad is not None, dtype=dtype)
    with _without_onednn():
        out = _reference(op, ref.sample)
        if grad is None:
            return out, None
        targets = ref.leaves if wrt == "leaves" else ref.views[:count]
        grads = torch.autograd.grad(out, targets, grad.detach().cpu().to(out.dtype), allow_unused=True)
    return out, [torch.zeros_like(t) if g is None else g for t, g in zip(targets, grads)]


def check_forward(case: S.Case, device):
    op = OPS[case.op]
    built = Built(case, device)
    with _environment(case):
        out = _call(op, built.sample)
    expected, _ = _evaluate(op, case, built, torch.float64)
    peer, _ = _evaluate(op, case, built, None)
    assert out.dtype == case.dtype and out.device.type == device
    _close(out, expected, *_tolerance(op, case), "output", peer)
    x = built.views[0]
    if op.keeps_memory_format and _strictly_channels_last(x) and out.dim() == 4 and out.numel() > 0:
        assert out.is_contiguous(memory_format=torch.channels_last), "a channels_last input gave a result that is not"
    if op.keeps_dense_strides and is_non_overlapping_and_dense(x):
        assert out.stride() == x.stride(), "a dense input's layout is not kept"


def check_gradients(case: S.Case, device):
    """Gradients with respect to the leaves: through the views, our op and its backward op, against the
    reference's autograd."""
    op = OPS[case.op]
    dtype = torch.float64 if device == "cpu" else case.dtype
    built = Built(case, device, dtype, requires_grad=True, uniform=device == "cpu")
    with _environment(case):
        out = _call(op, built.sample)
        grad = _grad_like(out, case.grad_seed)
        grads = torch.autograd.grad(out, built.leaves, grad, allow_unused=True)
    _, want = _evaluate(op, case, built, torch.float64, grad)
    _, peer = _evaluate(op, case, built, None, grad)
    scales = _term_scales(op, built.reference(case), grad)
    rtol, atol = _tolerance(op, case, dtype)
    for i, (leaf, g) in enumerate(zip(built.leaves, grads)):
        g = torch.zeros_like(leaf) if g is None else g
        assert g.dtype == leaf.dtype, f"gradient {i}: a {leaf.dtype} input got a {g.dtype} gradient"
        _close(g, want[i], rtol, atol, f"gradient of argument {i}", peer[i], scales[i])


def _symmetric_padding(case: S.Case):
    """The case with its padding as the backward ops take it (symmetric ints), or None where "same" is not."""
    padding = case.kwargs.get("padding")
    if padding == "valid":
        return replace(case, kwargs={**case.kwargs, "padding": 0})
    if padding == "same":
        w = case.args[1].shape
        dilation = case.kwargs["dilation"]
        d = (dilation, dilation) if isinstance(dilation, int) else dilation
        totals = [d[i] * (w[2 + i] - 1) for i in range(2)]
        if any(t % 2 for t in totals):
            return None
        return replace(case, kwargs={**case.kwargs, "padding": (totals[0] // 2, totals[1] // 2)})
    return case


def check_backward_op(case: S.Case, device):
    op = OPS[case.op]
    case = _symmetric_padding(case)
    assume(case is not None)
    built = Built(case, device)
    with _environment(case):
        out = _call(op, built.sample)
        grad = _grad_like(out, case.grad_seed)
        args = op.backward_args(built.sample, grad)
        if case.mask is not None:
            args = (*args[:-1], list(case.mask))
        result = op.backward_overload(*args)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    _, want = _evaluate(op, case, built, torch.float64, grad, "views", len(results))
    _, peer = _evaluate(op, case, built, None, grad, "views", len(results))
    scales = _term_scales(op, built.reference(case), grad, "views")
    rtol, atol = _tolerance(op, case)
    for i, r in enumerate(results):
        if case.mask is not None and not case.mask[i]:
            assert r is None, f"result {i}: output_mask left it out, got a tensor"
            continue
        view = built.views[i]
        assert r is not None, f"result {i}: output_mask asked for it, got None"
        assert r.dtype == view.dtype and r.device == view.device, f"result {i}: {r.dtype} on {r.device}"
        _close(r, want[i], rtol, atol, f"backward result {i}", peer[i], scales[i])


# --- the tests --------------------------------------------------------------------------------------------------------

# Examples per test relative to the profile's (OpInfo.property_cost).
_COST = {name: op.property_cost for name, op in OPS.items()}


def _cases(name, device):
    return OPS[name].cases(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(OPS))
def test_forward(name, device):
    @S.examples(_COST[name])
    @given(case=_cases(name, device))
    def run(case):
        check_forward(case, device)

    run()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(OPS))
def test_gradients(name, device):
    @S.examples(_COST[name])
    @given(case=_cases(name, device))
    def run(case):
        check_gradients(case, device)

    run()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(OPS))
def test_backward_op(name, device):
    @S.examples(_COST[name])
    @given(case=_cases(name, device))
    def run(case):
        check_backward_op(case, device)

    run()


def test_every_op_has_cases():
    for name, op in OPS.items():
        assert isinstance(op.cases("cpu"), st.SearchStrategy), f"{name}: cases gives no hypothesis strategy"


# --- CUDA: every kernel reached --------------------------------------------------------------------------------------

REACHED: dict[str, set] = {}


def _device_has(needs: str) -> bool:
    if not needs:
        return True
    if needs == "sm80":
        return torch.cuda.get_device_capability()[0] >= 8
    if needs == "sm90_conv":
        import customops

        return torch.cuda.get_device_capability() == (9, 0) and bool(customops.build_info().get("sm90_conv"))
    raise KeyError(needs)


def _forward_and_backward(case: S.Case, built: Built):
    op = OPS[case.op]
    out = _call(op, built.sample)
    grad = _grad_like(out, case.grad_seed)
    grads = torch.autograd.grad(out, built.leaves, grad, allow_unused=True)
    return out, grad, grads


@requires_cuda
@pytest.mark.usefixtures("customops_kernels")
@pytest.mark.parametrize("family", list(S.CUDA_FAMILIES))
def test_cuda_kernel_family(family):
    """The family's cases against the reference (forward and gradients in the drawn dtype), and, over all of them,
    every kernel the family is for among those that ran."""
    fam = S.CUDA_FAMILIES[family]
    if not _device_has(fam.needs):
        pytest.skip(f"{family} needs {fam.needs}")
    seen: set = set()
    count = [0]

    @S.examples(0.5)
    @given(case=fam.cases())
    def run(case):
        op = OPS[case.op]
        built = Built(case, "cuda", requires_grad=True)
        results = {}
        # The profiler costs more than a small example: every example's kernels are recorded until the family's
        # have all run, then one example in 16 (the long profile's examples are ten times as many).
        profile = count[0] % 16 == 0 or any(not S.reached(k, seen) for k in fam.kernels)
        count[0] += 1
        with _environment(case):
            if profile:
                seen.update(cuda_kernel_names(lambda: results.update(r=_forward_and_backward(case, built))))
            else:
                results["r"] = _forward_and_backward(case, built)
        out, grad, grads = results["r"]
        expected, want = _evaluate(op, case, built, torch.float64, grad)
        peer, peer_grads = _evaluate(op, case, built, None, grad)
        rtol, atol = _tolerance(op, case)
        _close(out, expected, rtol, atol, "output", peer)
        scales = _term_scales(op, built.reference(case), grad)
        for i, g in enumerate(grads):
            _close(torch.zeros_like(built.leaves[i]) if g is None else g, want[i], rtol, atol,
                   f"gradient of argument {i}", peer_grads[i], scales[i])

    run()
    REACHED[family] = seen
    missing = [k for k in fam.kernels if not S.reached(k, seen)]
    assert not missing, f"{family}: no example reached {missing}; kernels that ran: {sorted(seen)}"


@requires_cuda
def test_cuda_kernel_families_all_reached():
    """After the family tests: every family that could run on this device reached its kernels (a family test
    deselected with -k leaves nothing to check)."""
    ran = {f for f in S.CUDA_FAMILIES if f in REACHED}
    if not ran:
        pytest.skip("no family test ran in this session")
    for family in ran:
        fam = S.CUDA_FAMILIES[family]
        assert all(S.reached(k, REACHED[family]) for k in fam.kernels), family


def test_family_patterns():
    assert S.reached("a&!nhwc", ["x a y"]) and not S.reached("a&!nhwc", ["nhwc::a"])
    assert S.reached("a&nhwc", ["nhwc::a", "b"]) and not S.reached("a&nhwc", ["a", "nhwc::b"])


@given(st.data())
@S.examples(0.2)
def test_tensor_specs_build_their_layouts(data):
    shape = data.draw(st.tuples(*[st.integers(0, 4)] * 4))
    spec = data.draw(S.tensor_spec(shape))
    leaf = spec.leaf(torch.float32, "cpu")
    view = spec.view(leaf)
    assert tuple(view.shape) == shape
    if spec.layout == "channels_last":
        assert view.is_contiguous(memory_format=torch.channels_last)
    if spec.layout == "expanded":
        assert view.stride()[spec.dim] == 0
