"""trilinear_interpolation with feats and points of different floating dtypes.

The rule under test: the output, grad_out and grad_feats have feats' dtype,
grad_points has points' dtype; the op computes in opmath of feats' dtype and
reads the points at their own precision (never rounded to a half type).
Expected values come from the float64 formula (op_db.trilinear._trilinear_ref) on the
same rounded inputs."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

import customops
from conftest import requires_cuda
from op_db import DEFAULT_TOLERANCES
from op_db.trilinear import _trilinear_ref

pytestmark = pytest.mark.torch_independent

FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
PAIRS = list(itertools.product(FLOATING, FLOATING))
MIXED = [(f, p) for f, p in PAIRS if f != p]
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
HALF = (torch.float16, torch.bfloat16)

backward_op = torch.ops.customops.trilinear_interpolation_backward.default


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _pair_id(pair) -> str:
    return f"feats_{_name(pair[0])}-points_{_name(pair[1])}"


def _looser(a: torch.dtype, b: torch.dtype) -> tuple[float, float]:
    """Tolerances of the less precise of two dtypes (a result computed from one
    and stored in the other)."""
    ta, tb = DEFAULT_TOLERANCES[a], DEFAULT_TOLERANCES[b]
    return max(ta[0], tb[0]), max(ta[1], tb[1])


def _inputs(n, f, fdt, pdt, device, low=-1.0, high=1.0, points_transposed=False):
    feats = (torch.rand(n, 8, f, dtype=torch.float64) * 4 - 2).to(device, fdt)
    points = (torch.rand(n, 3, dtype=torch.float64) * (high - low) + low).to(device, pdt)
    if points_transposed:  # non-contiguous points of the same values
        points = points.t().contiguous().t()
    return feats, points


def _reference(feats, points, grad):
    """Output and (grad_feats, grad_points) of the float64 formula."""
    f64 = feats.detach().double().requires_grad_()
    p64 = points.detach().double().requires_grad_()
    out = _trilinear_ref(f64, p64)
    gf, gp = torch.autograd.grad(out, (f64, p64), grad.double())
    return out, gf, gp


def _close(actual, expected, tol, what):
    rtol, atol = tol
    scale = max(1.0, expected.abs().max().item()) if expected.numel() else 1.0
    torch.testing.assert_close(actual.double(), expected, rtol=rtol, atol=atol * scale, msg=lambda m: f"{what}: {m}")


# Sizes: odd F (one feature a thread on CUDA), F a multiple of every vector
# width, points outside [-1, 1], non-contiguous points, no points, no features.
CASES = [
    dict(n=37, f=33),
    dict(n=64, f=64),
    dict(n=9, f=16, low=-3.0, high=3.0),
    dict(n=11, f=8, points_transposed=True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", PAIRS, ids=_pair_id)
def test_forward_and_backward_match_reference(pair, device):
    fdt, pdt = pair
    for case in CASES:
        feats, points = _inputs(**case, fdt=fdt, pdt=pdt, device=device)
        feats.requires_grad_()
        points.requires_grad_()
        out = customops.trilinear_interpolation(feats, points)
        assert out.dtype == fdt and out.device.type == device and out.shape == (case["n"], case["f"])
        grad = torch.randn(out.shape, dtype=torch.float64).to(device, fdt)
        gf, gp = torch.autograd.grad(out, (feats, points), grad)
        assert gf.dtype == fdt and gp.dtype == pdt

        ref, rgf, rgp = _reference(feats, points, grad)
        _close(out, ref, DEFAULT_TOLERANCES[fdt], f"{case} output")
        _close(gf, rgf, DEFAULT_TOLERANCES[fdt], f"{case} grad_feats")
        # A sum over F of feats-dtype products, stored in points' dtype.
        _close(gp, rgp, _looser(fdt, pdt), f"{case} grad_points")

        # The registered backward op, and each half of its output_mask.
        bf, bp = backward_op(grad, feats.detach(), points.detach(), [True, True])
        assert bf.dtype == fdt and bp.dtype == pdt
        torch.testing.assert_close(bf, gf, rtol=0, atol=0)
        torch.testing.assert_close(bp, gp, rtol=0, atol=0)
        only_f, none_p = backward_op(grad, feats.detach(), points.detach(), [True, False])
        none_f, only_p = backward_op(grad, feats.detach(), points.detach(), [False, True])
        assert none_p is None and none_f is None
        torch.testing.assert_close(only_f, gf, rtol=0, atol=0)
        torch.testing.assert_close(only_p, gp, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", MIXED, ids=_pair_id)
def test_empty_inputs_keep_the_dtype_rule(pair, device):
    fdt, pdt = pair
    for n, f in ((0, 4), (3, 0)):
        feats, points = _inputs(n, f, fdt, pdt, device)
        out = customops.trilinear_interpolation(feats, points)
        assert out.dtype == fdt and out.shape == (n, f)
        gf, gp = backward_op(torch.zeros(n, f, dtype=fdt, device=device), feats, points, [True, True])
        assert gf.dtype == fdt and gf.shape == (n, 8, f)
        assert gp.dtype == pdt and gp.shape == (n, 3)
        assert torch.all(gp == 0)  # no features: nothing flows to the points


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fdt", HALF, ids=_name)
@pytest.mark.parametrize("pdt", (torch.float32, torch.float64), ids=_name)
def test_points_are_not_rounded_to_half(fdt, pdt, device):
    """feats_k = sx * sy with s = 2 bit - 1 makes out = x * y, so d out / dx = y:
    with grad_out = 1 the points' gradient is y itself, to float32 precision.
    Coordinates rounded to a half type would be off by up to 2.4e-4 (float16)
    or 2e-3 (bfloat16) relative."""
    n = 257
    k = torch.arange(8)
    sx, sy = (k >> 2 & 1) * 2 - 1, (k >> 1 & 1) * 2 - 1
    feats = (sx * sy).to(device, fdt)[None, :, None].expand(n, 8, 1).contiguous()
    points = (torch.rand(n, 3, dtype=torch.float64) * 2 - 1).to(device, pdt)
    _, gp = backward_op(torch.ones(n, 1, dtype=fdt, device=device), feats, points, [False, True])
    assert gp.dtype == pdt
    y = points[:, 1].double()
    # float32 arithmetic on the coordinate (double points are computed in float32).
    torch.testing.assert_close(gp[:, 0].double(), y, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_double_points_with_float_feats_compute_in_float(device):
    """Double points do not make the op compute in double. feats_k = sx * sy *
    sz gives out = x * y * z, so with grad_out = 1 the (float64) points'
    gradient along x is y * z: computed in float32 it is off by float32
    rounding, far above the 1e-16 of float64 arithmetic, yet float32-accurate."""
    n = 4096
    k = torch.arange(8)
    s = [(k >> (2 - d) & 1) * 2 - 1 for d in range(3)]
    feats = (s[0] * s[1] * s[2]).to(device, torch.float32)[None, :, None].expand(n, 8, 1).contiguous()
    points = (torch.rand(n, 3, dtype=torch.float64) * 2 - 1).to(device)
    _, gp = backward_op(torch.ones(n, 1, device=device), feats, points, [False, True])
    assert gp.dtype == torch.float64
    err = (gp[:, 0] - points[:, 1] * points[:, 2]).abs().max().item()
    assert 1e-12 < err < 1e-6, err


def test_gradcheck_float64():
    feats = torch.randn(6, 8, 5, dtype=torch.float64, requires_grad=True)
    points = (torch.rand(6, 3, dtype=torch.float64) * 2.4 - 1.2).requires_grad_()
    assert torch.autograd.gradcheck(customops.trilinear_interpolation, (feats, points))
    assert torch.autograd.gradgradcheck(customops.trilinear_interpolation, (feats, points))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", MIXED, ids=_pair_id)
def test_second_order_matches_reference(pair, device):
    """Double backward with mixed dtypes (the composite backward-of-backward):
    the gradient of <grad_feats, A> + <grad_points, B> with respect to
    grad_out, feats and points, against float64 autograd of the formula."""
    fdt, pdt = pair
    feats, points = _inputs(7, 6, fdt, pdt, device)
    grad = torch.randn(7, 6, dtype=torch.float64).to(device, fdt)
    A = torch.randn(7, 8, 6, dtype=torch.float64).to(device, fdt)
    B = torch.randn(7, 3, dtype=torch.float64).to(device, pdt)

    def second(f, p, g):
        f, p, g = (t.detach().requires_grad_() for t in (f, p, g))
        if f.dtype == torch.float64 and p.dtype == torch.float64 and g.dtype == torch.float64:
            out = _trilinear_ref(f, p)
        else:
            out = customops.trilinear_interpolation(f, p)
        gf, gp = torch.autograd.grad(out, (f, p), g, create_graph=True)
        total = (gf.double() * A.double()).sum() + (gp.double() * B.double()).sum()
        return torch.autograd.grad(total, (g, f, p))

    dg, df, dp = second(feats, points, grad)
    assert (dg.dtype, df.dtype, dp.dtype) == (fdt, fdt, pdt)
    rdg, rdf, rdp = second(feats.double(), points.double(), grad.double())
    tol = _looser(fdt, pdt)
    tol = (tol[0] * 4, tol[1] * 4)  # terms rounded to feats' dtype before a sum over 8 corners
    _close(dg, rdg, tol, "d grad_out")
    _close(df, rdf, tol, "d feats")
    _close(dp, rdp, tol, "d points")


OPCHECK_PAIRS = [(torch.float16, torch.float32), (torch.bfloat16, torch.float32), (torch.float32, torch.float64),
                 (torch.float64, torch.float32), (torch.float32, torch.bfloat16)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", OPCHECK_PAIRS, ids=_pair_id)
def test_opcheck_mixed(pair, device):
    fdt, pdt = pair
    feats, points = _inputs(5, 7, fdt, pdt, device)
    feats.requires_grad_()
    points.requires_grad_()
    torch.library.opcheck(torch.ops.customops.trilinear_interpolation.default, (feats, points))
    grad = torch.randn(5, 7, dtype=torch.float64).to(device, fdt).requires_grad_()
    for mask in ([True, True], [False, True], [True, False]):
        torch.library.opcheck(backward_op, (grad, feats, points, mask))


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_mixed(device):
    torch._dynamo.reset()
    compiled = torch.compile(customops.trilinear_interpolation, fullgraph=True)
    feats, points = _inputs(13, 10, torch.bfloat16, torch.float32, device)
    eager_in = [t.clone().requires_grad_() for t in (feats, points)]
    comp_in = [t.clone().requires_grad_() for t in (feats, points)]
    expected = customops.trilinear_interpolation(*eager_in)
    actual = compiled(*comp_in)
    assert actual.dtype == torch.bfloat16
    torch.testing.assert_close(actual, expected)
    grad = torch.randn_like(expected)
    got = torch.autograd.grad(actual, comp_in, grad)
    want = torch.autograd.grad(expected, eager_in, grad)
    assert [g.dtype for g in got] == [torch.bfloat16, torch.float32]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


AUTOCAST = [("cpu", torch.bfloat16), pytest.param("cuda", torch.float16, marks=requires_cuda),
            pytest.param("cuda", torch.bfloat16, marks=requires_cuda)]


@pytest.mark.parametrize("device,amp_dtype", AUTOCAST)
def test_autocast_step_reaches_float32_parameters(device, amp_dtype):
    """Under autocast a Linear makes half-type feats from a float32 parameter
    while the points stay float32: the op takes both, and the gradients reach
    the float32 parameters (and the float32 points) as float32."""
    torch.manual_seed(0)
    n, fin, fout = 50, 12, 16
    linear = nn.Linear(fin, fout).to(device)
    x = torch.randn(n, 8, fin, device=device)
    points = (torch.rand(n, 3, device=device) * 2 - 1).requires_grad_()
    target = torch.randn(n, fout, device=device)

    with torch.autocast(device, dtype=amp_dtype):
        feats = linear(x)
        assert feats.dtype == amp_dtype and points.dtype == torch.float32
        out = customops.trilinear_interpolation(feats, points)
        assert out.dtype == amp_dtype
        loss = (out.float() - target).square().mean()
    loss.backward()
    assert linear.weight.grad.dtype == torch.float32 and linear.bias.grad.dtype == torch.float32
    assert points.grad.dtype == torch.float32

    # The same step in float64 without autocast.
    w64 = linear.weight.detach().double().requires_grad_()
    b64 = linear.bias.detach().double().requires_grad_()
    p64 = points.detach().double().requires_grad_()
    ref_loss = (_trilinear_ref(nn.functional.linear(x.double(), w64, b64), p64) - target.double()).square().mean()
    ref_loss.backward()
    tol = 2e-2 if amp_dtype == torch.bfloat16 else 3e-3  # activations rounded to amp_dtype
    for got, want in ((linear.weight.grad, w64.grad), (linear.bias.grad, b64.grad), (points.grad, p64.grad)):
        torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * want.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
def test_grad_out_must_have_feats_dtype(device):
    feats, points = _inputs(4, 5, torch.float16, torch.float32, device)
    with pytest.raises(RuntimeError, match=r"expected grad_out to have the dtype of feats \(Half\), got Float"):
        backward_op(torch.zeros(4, 5, device=device), feats, points, [True, True])
    with pytest.raises(RuntimeError, match=r"expected grad_out to have the dtype of feats \(Half\), got Float"):
        backward_op(torch.zeros(4, 5, device="meta"), feats.to("meta"), points.to("meta"), [True, True])


def test_meta_gives_the_same_dtypes():
    for fdt, pdt in MIXED:
        feats, points = _inputs(4, 5, fdt, pdt, "meta")
        out = customops.trilinear_interpolation(feats, points)
        assert out.dtype == fdt and out.device.type == "meta"
        gf, gp = backward_op(torch.empty(4, 5, dtype=fdt, device="meta"), feats, points, [True, True])
        assert gf.dtype == fdt and gp.dtype == pdt
