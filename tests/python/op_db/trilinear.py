# scaffold: the op in a line | """trilinear_interpolation: TODO(trilinear_interpolation)."""
"""trilinear_interpolation: per point, the trilinear blend of its voxel's 8 corner features (NeRF's), at
coordinates in [-1, 1] (outside: extrapolation)."""
# scaffold-end

from __future__ import annotations

import torch
from hypothesis import strategies as st
from torch.testing import make_tensor

import customops
from fuzz_common import T, batched
from strategies import Case, _dtype, _mask, tensor_spec

from ._common import ErrorInput, OpInfo, SampleInput, _other_device, _placements

ops = torch.ops.customops


def _trilinear_ref(feats, points):
    # scaffold: the reference: the op in plain PyTorch, written from its definition | raise NotImplementedError("TODO(trilinear_interpolation)")
    """The NeRF formula, written out corner by corner."""
    u, v, w = ((points + 1) / 2).unbind(-1)
    u, v, w = u[:, None], v[:, None], w[:, None]
    a, b, c, d = (1 - v) * (1 - w), (1 - v) * w, v * (1 - w), v * w
    f = feats.unbind(1)
    return (1 - u) * (a * f[0] + b * f[1] + c * f[2] + d * f[3]) + u * (a * f[4] + b * f[5] + c * f[6] + d * f[7])
    # scaffold-end


def _trilinear_samples(device, dtype, requires_grad):
    # scaffold: the samples: every size class, empty, non-contiguous, edge values | raise NotImplementedError("TODO(trilinear_interpolation)")
    def t(shape, low=-2, high=2, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=low, high=high, requires_grad=requires_grad, **kw)

    def pts(n, low=-1, high=1):
        return t((n, 3), low=low, high=high)

    yield SampleInput((t((5, 8, 7)), pts(5)), name="odd_F")
    yield SampleInput((t((0, 8, 4)), pts(0)), name="empty")
    yield SampleInput((t((3, 8, 1)), pts(3)), name="F1")
    yield SampleInput((t((4, 8, 0)), pts(4)), name="F0")
    yield SampleInput((t((4, 8, 256)), pts(4)), name="F256")
    yield SampleInput((t((2, 8, 300)), pts(2)), name="large_odd_F")
    yield SampleInput((t((37, 8, 32)), pts(37)), name="many_points")
    yield SampleInput((t((6, 8, 8)), pts(6, -3, 3)), name="outside_unit_cube")
    yield SampleInput((t((5, 8, 6), noncontiguous=True), t((3, 5), low=-1, high=1).t()), name="noncontiguous")
    corners = torch.tensor([[-1.0, -1, -1], [1, 1, 1], [1, -1, 1], [0, 0, 0]], dtype=dtype, device=device)
    yield SampleInput((t((4, 8, 3)), corners.requires_grad_(requires_grad)), name="corners_and_centre")
    yield from _trilinear_mixed_samples(device, dtype, requires_grad)
    # scaffold-end


# scaffold: what the op's samples share |
def _trilinear_mixed_samples(device, dtype, requires_grad):
    """feats of `dtype` with points of a more precise dtype: the output and
    feats' gradient have `dtype`, the points' gradient the points' dtype (the
    points are read at their own precision). None for float64 feats, whose
    samples test_gradcheck runs with float64 points only."""
    wider = {torch.float16: (torch.float32, torch.float64), torch.bfloat16: (torch.float32, torch.float64),
             torch.float32: (torch.float64,)}

    def t(shape, pdt=dtype, low=-2, high=2, **kw):
        return make_tensor(shape, device=device, dtype=pdt, low=low, high=high, requires_grad=requires_grad, **kw)

    for pdt in wider.get(dtype, ()):
        name = str(pdt).removeprefix("torch.")
        yield SampleInput((t((9, 8, 16)), t((9, 3), pdt, -1, 1)), name=f"points_{name}")
        yield SampleInput((t((6, 8, 5)), t((6, 3), pdt, -3, 3)), name=f"points_{name}_outside_unit_cube")
        yield SampleInput((t((5, 8, 6), noncontiguous=True), t((3, 5), pdt, -1, 1).t()),
                          name=f"points_{name}_noncontiguous")
        yield SampleInput((t((0, 8, 4)), t((0, 3), pdt, -1, 1)), name=f"points_{name}_empty")
# scaffold-end


def _trilinear_autocast_samples(device, low, requires_grad):
    # scaffold: the inputs as autocast gives them to the op | raise NotImplementedError("TODO(trilinear_interpolation)")
    """As under AMP: feats in the autocast dtype (from a Linear), float32 points."""

    def t(shape, dtype, low_=-2, high=2):
        return make_tensor(shape, device=device, dtype=dtype, low=low_, high=high, requires_grad=requires_grad)

    for n, f, name in ((9, 16, "F16"), (5, 7, "odd_F"), (0, 4, "empty")):
        yield SampleInput((t((n, 8, f), low), t((n, 3), torch.float32, -1, 1)), name=f"{name}_{low}_float32_points")
    # scaffold-end


def _trilinear_dynamic(device, dtype):
    # scaffold: the dynamic-shape samples (sizes that differ between calls) | raise NotImplementedError("TODO(trilinear_interpolation)")
    # No size shared with another dimension (8 corners, 3 coordinates): equal
    # sizes would be one symbol in the first graph and force a recompile.
    for n, f in ((5, 4), (17, 6), (40, 7)):
        yield SampleInput((make_tensor((n, 8, f), device=device, dtype=dtype, low=-2, high=2),
                           make_tensor((n, 3), device=device, dtype=dtype, low=-1, high=1)), name=f"n{n}_f{f}")
    # scaffold-end


def _trilinear_errors(device):
    # scaffold: the bad inputs and the messages they raise | raise NotImplementedError("TODO(trilinear_interpolation)")
    f = torch.randn(4, 8, 5, device=device)
    p = torch.rand(4, 3, device=device)
    yield ErrorInput(SampleInput((f[:, 0], p)), r"expected feats of shape \(N, 8, F\), got \[4, 5\]")
    yield ErrorInput(SampleInput((f[:, :7], p)), r"expected feats of shape \(N, 8, F\), got \[4, 7, 5\]")
    yield ErrorInput(SampleInput((f, p[:, :2])), r"expected points of shape \(N, 3\), got \[4, 2\]")
    yield ErrorInput(SampleInput((f, p[:3])), r"expected feats and points to have the same N, got 4 and 3")
    yield ErrorInput(SampleInput((f.long(), p)), r"expected feats to be a floating-point tensor")
    yield ErrorInput(SampleInput((f, p.int())), r"expected points to be a floating-point tensor")
    g = torch.randn(4, 5, device=device)
    yield ErrorInput(SampleInput((g[:, :4], f, p, [True, True])), r"expected grad_out of shape \(N, F\)",
                     backward=True)
    yield ErrorInput(SampleInput((g.double(), f, p, [True, True])), r"expected grad_out to have the dtype of feats",
                     backward=True)
    # grad_out follows feats, not points.
    yield ErrorInput(SampleInput((g.double(), f, p.double(), [True, True])),
                     r"expected grad_out to have the dtype of feats \(Float\), got Double", backward=True)
    other = _other_device(device)
    if other is not None:
        yield ErrorInput(SampleInput((f, p.to(other))), r"expected points and feats on the same device")
        yield ErrorInput(SampleInput((g.to(other), f, p, [True, True])), r"expected grad_out and feats on the same",
                         backward=True)
    # scaffold-end


# scaffold: the gradients' rounding bounds, where a gradient sums cancelling terms (else none) |
def _trilinear_term_scales(views, grad):
    """The points' gradient sums the corners' feats . grad times the weights' derivatives: with equal corners (an
    expanded feats) the sum cancels exactly in float64, and the op's rounding errors are of the size of the terms,
    which this bounds."""
    feats, points = (v.detach().double() for v in views)
    s = torch.einsum("nkf,nf->nk", feats.abs(), grad.detach().cpu().double().abs())
    t = (points + 1) / 2
    factor = torch.maximum(t.abs(), (1 - t).abs()).amax(-1)
    bound = (0.5 * factor**2 * s.sum(-1)).max().item() if s.numel() else 0.0
    return [None, bound]
# scaffold-end


@st.composite
def _trilinear_cases(draw, device):
    # scaffold: the property tests' inputs | raise NotImplementedError("TODO(trilinear_interpolation)")
    n = draw(st.integers(0, 17))
    f = draw(st.one_of(st.integers(0, 9), st.sampled_from([16, 33, 64, 130])))
    dtype = draw(_dtype(device))
    # Points may be more precise than feats (AMP: float32 points, half feats).
    wider = [dtype] + [t for t in (torch.float32, torch.float64) if t.itemsize > dtype.itemsize]
    pdtype = draw(st.sampled_from(wider))
    reach = draw(st.sampled_from([1.0, 3.0]))  # outside [-1, 1]: extrapolation
    feats = draw(tensor_spec((n, 8, f), -2, 2))
    points = draw(tensor_spec((n, 3), -reach, reach, dtype=None if pdtype == dtype else pdtype))
    return Case("trilinear_interpolation", (feats, points), {}, dtype, mask=_mask(draw, 2),
                grad_seed=draw(st.integers(0, 2**31 - 1)))
    # scaffold-end


def _trilinear_fuzz_call(rng, backward, device, dtype):
    batched(rng)  # drawn by every op's call, used or not: see fuzz_common.batched
    # scaffold: the fuzzer's arguments (forward; backward) | raise NotImplementedError("TODO(trilinear_interpolation)")
    n, feat = rng.randint(0, 3), rng.randint(0, 3)
    args = [T([n, 8, feat], dtype, device), T([n, 3], rng.choice([dtype, torch.float32, torch.float64]), device)]
    if not backward:
        return args
    return [T([n, feat], dtype, device)] + args + [[rng.random() < 0.7, rng.random() < 0.7]]
    # scaffold-end


def _trilinear_sharding(rnd):
    # scaffold: the sharding cases: inputs, placements in, placements out | raise NotImplementedError("TODO(trilinear_interpolation)")
    Shard, R, P = _placements()
    feats, points = rnd(10, 8, 6), rnd(10, 3).clamp(-1, 1)
    yield "trilinear points", ops.trilinear_interpolation.default, (feats, points), [Shard(0), Shard(0)], [Shard(0)]
    yield "trilinear features", ops.trilinear_interpolation.default, (feats, points), [Shard(2), R], [Shard(1)]
    yield "trilinear partial", ops.trilinear_interpolation.default, (feats, points), [P, R], [P]
    tgo = rnd(10, 6)
    tb = (tgo, feats, points, [True, True])
    yield ("trilinear_backward points", ops.trilinear_interpolation_backward.default, tb,
           [Shard(0), Shard(0), Shard(0)], [Shard(0), Shard(0)])
    yield ("trilinear_backward features", ops.trilinear_interpolation_backward.default, tb, [Shard(1), Shard(2), R],
           [Shard(2), P])
    yield "trilinear_backward partial", ops.trilinear_interpolation_backward.default, tb, [P, R, R], [P, P]
    yield ("trilinear_backward features, feats only", ops.trilinear_interpolation_backward.default,
           (tgo, feats, points, [True, False]), [Shard(1), Shard(2), R], [Shard(2)])
    # scaffold-end


TRILINEAR_INTERPOLATION = OpInfo(
    name="trilinear_interpolation",
    op=customops.trilinear_interpolation,
    ref=_trilinear_ref,
    sample_inputs=_trilinear_samples,
    dynamic_samples=_trilinear_dynamic,
    error_inputs=_trilinear_errors,
    module=lambda sample: (customops.TrilinearInterpolation(), sample.args),
    backward_args=lambda sample, grad: (grad, *sample.args, [True, True]),
    autocast_samples=_trilinear_autocast_samples,
    # scaffold: the rounding bounds' function, if any |
    gradient_term_scales=_trilinear_term_scales,
    # scaffold-end
    cases=_trilinear_cases,
    # scaffold: the property tests' cost (time relative to the cheapest op) | property_cost="TODO(trilinear_interpolation): the examples' cost relative to the cheapest op's, a number",
    property_cost=2.0,
    # scaffold-end
    fuzz_call=_trilinear_fuzz_call,
    # scaffold: the ONNX nodes on the path to the output | onnx_nodes=lambda s: [("TODO(trilinear_interpolation)", {})],
    onnx_nodes=lambda s: [("MatMul", {})],
    # scaffold-end
    sharding_cases=_trilinear_sharding,
)

OPS = [TRILINEAR_INTERPOLATION]
