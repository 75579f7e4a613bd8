"""upsample_bilinear2d: bilinear resize of (N, C, H, W) images to an output size, in ONNX Resize's coordinate modes
half_pixel, align_corners and asymmetric."""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from torch.testing import make_tensor

import customops
from fuzz_common import T, _pair, batched
from strategies import MODES, Case, _dtype, _pair_arg, tensor_spec

from ._common import ErrorInput, OpInfo, SampleInput, _low_precision_first_input, _placements

ops = torch.ops.customops


# (input shape, output size, coordinate_mode, name)
_RESIZES = [
    ((2, 3, 5, 7), (10, 14), "half_pixel", "x2_half_pixel"),
    ((2, 3, 9, 11), (4, 5), "half_pixel", "down_non_integer_half_pixel"),
    ((1, 2, 6, 5), (9, 13), "align_corners", "up_non_integer_align_corners"),
    ((1, 2, 6, 5), (3, 2), "align_corners", "down_align_corners"),
    ((2, 2, 5, 4), (10, 8), "asymmetric", "x2_asymmetric"),
    ((2, 2, 9, 7), (4, 3), "asymmetric", "down_asymmetric"),
    ((1, 2, 4, 6), (7, 5), "asymmetric", "mixed_asymmetric"),
    ((1, 1, 1, 1), (1, 1), "half_pixel", "1x1"),
    ((2, 3, 1, 1), (3, 4), "align_corners", "from_1x1"),
    ((2, 3, 4, 3), (1, 1), "half_pixel", "to_1x1_half_pixel"),
    ((2, 3, 4, 3), (1, 1), "align_corners", "to_1x1_align_corners"),
    ((2, 3, 4, 3), (1, 1), "asymmetric", "to_1x1_asymmetric"),
    ((2, 2, 6, 5), (6, 5), "half_pixel", "same_size"),
    ((0, 3, 4, 4), (8, 8), "half_pixel", "batch0"),
    ((1, 2, 3, 2), (29, 23), "half_pixel", "large_factor"),  # > 8 readers per input pixel
    ((1, 2, 37, 45), (74, 90), "half_pixel", "multi_tile"),
]


def _resize_ref(input, output_size, coordinate_mode="half_pixel"):
    """Plain PyTorch: F.interpolate for its two conventions, the ONNX formula
    written out with gathers for asymmetric (which PyTorch lacks). It takes
    what the op takes: an output size of one int, and an input of no channels,
    which F.interpolate refuses (the empty result is built from the input, so
    that gradients still flow)."""
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    if input.shape[1] == 0:
        return input.new_zeros(input.shape[0], 0, *output_size) + 0 * input.sum()
    if coordinate_mode != "asymmetric":
        return torch.nn.functional.interpolate(input, size=output_size, mode="bilinear",
                                               align_corners=coordinate_mode == "align_corners")

    def taps(n_in, n_out):
        src = torch.arange(n_out, dtype=torch.float64, device=input.device) * (n_in / n_out)
        i0 = src.floor().long().clamp(max=n_in - 1)
        i1 = (i0 + 1).clamp(max=n_in - 1)
        lam = (src - i0).clamp(0, 1).to(input.dtype)
        return i0, i1, lam

    y0, y1, ly = taps(input.shape[-2], output_size[0])
    x0, x1, lx = taps(input.shape[-1], output_size[1])
    rows = input[..., y0, :] * (1 - ly)[:, None] + input[..., y1, :] * ly[:, None]
    return rows[..., x0] * (1 - lx) + rows[..., x1] * lx


def _resize_samples(device, dtype, requires_grad):
    def t(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=-4, high=4, requires_grad=requires_grad, **kw)

    for shape, size, mode, name in _RESIZES:
        yield SampleInput((t(shape),), {"output_size": size, "coordinate_mode": mode}, name)
    yield SampleInput((t((2, 3, 6, 7), noncontiguous=True),), {"output_size": (11, 5), "coordinate_mode": "asymmetric"},
                      "noncontiguous")
    x = make_tensor((2, 5, 6, 7), device=device, dtype=dtype, low=-4, high=4).to(memory_format=torch.channels_last)
    for mode in ("half_pixel", "asymmetric"):
        yield SampleInput((x.detach().requires_grad_(requires_grad),), {"output_size": (12, 9), "coordinate_mode": mode},
                          f"channels_last_{mode}")
    x = make_tensor((2, 8, 5, 4), device=device, dtype=dtype, low=-4, high=4).to(memory_format=torch.channels_last)
    yield SampleInput((x.requires_grad_(requires_grad),), {"output_size": (3, 9), "coordinate_mode": "align_corners"},
                      "channels_last_vectorised")


def _resize_dynamic(device, dtype):
    # A fixed output size from inputs of several sizes (scale_factor, whose
    # sizes are symbolic too, has its own test in test_interpolation.py).
    for shape in ((2, 3, 8, 10), (4, 3, 11, 9), (5, 3, 16, 12)):
        yield SampleInput((make_tensor(shape, device=device, dtype=dtype, low=-4, high=4),),
                          {"output_size": (13, 7), "coordinate_mode": "half_pixel"}, f"{shape}")


def _resize_errors(device):
    x = torch.randn(2, 3, 5, 5, device=device)
    ok = {"output_size": (8, 8)}
    yield ErrorInput(SampleInput((x[0],), ok), r"expected input to be a 4-D \(N, C, H, W\) tensor, got 3-D")
    yield ErrorInput(SampleInput((x.long(),), ok), r"expected input to be a floating-point tensor")
    yield ErrorInput(SampleInput((x,), {"output_size": (8, 8), "coordinate_mode": "nearest"}),
                     r"unknown coordinate_mode 'nearest'; expected one of half_pixel, align_corners, asymmetric")
    yield ErrorInput(SampleInput((x,), {"output_size": (0, 4)}), r"expected output_size to be positive")
    yield ErrorInput(SampleInput((x,), {"scale_factor": 0.1}), r"expected output_size to be positive")
    yield ErrorInput(SampleInput((torch.randn(2, 3, 0, 5, device=device),), ok),
                     r"expected input to have non-empty H and W")
    yield ErrorInput(SampleInput((x,), {}), r"give output_size or scale_factor", error=ValueError)
    yield ErrorInput(SampleInput((x,), {"output_size": 1.5}), r"expected output_size to be an int or a pair of ints",
                     error=TypeError)
    yield ErrorInput(SampleInput((x[0], [4, 4], "half_pixel")), r"expected grad_out to be a 4-D", backward=True)
    yield ErrorInput(SampleInput((x, [4, -1], "half_pixel")), r"expected input_size to be positive", backward=True)
    yield ErrorInput(SampleInput((x, [4, 4], "bicubic")), r"unknown coordinate_mode 'bicubic'", backward=True)
    # Found by test_fuzz.py: sizes whose result overflows int64 (at::empty's message named no argument), and sizes
    # below -2^62, SymInts the dispatcher could not hand to the kernels as int64_t (the same).
    yield ErrorInput(SampleInput((x,), {"output_size": (2**62, 2**62)}),
                     r"the result's sizes \[2, 3, 4611686018427387904, 4611686018427387904\] \(from output_size\)")
    yield ErrorInput(SampleInput((x[:0],), {"output_size": (2**62, 5)}), r"\(from output_size\) overflow int64")
    yield ErrorInput(SampleInput((x,), {"output_size": (-2**63, 4)}), r"expected output_size to be positive")
    yield ErrorInput(SampleInput((x, [4, -2**63], "half_pixel")), r"expected input_size to be positive", backward=True)
    yield ErrorInput(SampleInput((x, [2**62, 2**62], "half_pixel")), r"\(from input_size\) overflow int64",
                     backward=True)


def _resize_module(sample):
    kw = sample.kwargs
    return customops.UpsampleBilinear2d(size=kw["output_size"], coordinate_mode=kw["coordinate_mode"]), sample.args


# Source coordinates are computed in float for float32 and the half types, as
# PyTorch does, so blend weights differ from the float64 reference by ~1e-7.
_RESIZE_TOLERANCES = {
    torch.float64: (1e-10, 1e-12),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 4e-3),
    torch.bfloat16: (1.6e-2, 3e-2),
}

def _resize_property_tolerance(case, dtype, tolerance):
    """The resize computes source coordinates in float for every dtype but float64, as PyTorch does: a coordinate
    near n carries an error of about n float epsilons, which moves the blend weights by as much (the tolerances
    above cover sizes up to about 100)."""
    rtol, atol = tolerance
    if dtype != torch.float64:
        size = case.kwargs["output_size"]
        extent = max(*case.args[0].shape[-2:], *((size, size) if isinstance(size, int) else size))
        atol = max(atol, 2 * torch.finfo(torch.float32).eps * extent)
    return rtol, atol


@st.composite
def _resize_cases(draw, device):
    shape = (draw(st.integers(0, 3)), draw(st.integers(0, 4)), draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    size = (draw(st.integers(1, 17)), draw(st.integers(1, 17)))  # up, down, equal, to and from 1
    x = draw(tensor_spec(shape, -4, 4))
    kw = {"output_size": _pair_arg(draw, size), "coordinate_mode": draw(st.sampled_from(MODES))}
    return Case("upsample_bilinear2d", (x,), kw, draw(_dtype(device)), grad_seed=draw(st.integers(0, 2**31 - 1)))


def _resize_fuzz_call(rng, backward, device, dtype):
    batched(rng)  # drawn by every op's call, used or not: see fuzz_common.batched
    shape = [rng.randint(0, 2), rng.randint(0, 3), rng.randint(1, 5), rng.randint(1, 5)]
    size = _pair(rng, 1, 6)
    mode = rng.choice(MODES)
    if not backward:
        return [T(shape, dtype, device), size, mode]
    return [T(shape[:2] + size, dtype, device), shape[2:], mode]


def _resize_onnx_nodes(sample):
    return [("Resize", {"mode": "linear", "coordinate_transformation_mode": sample.kwargs["coordinate_mode"]})]


def _resize_sharding(rnd):
    Shard, _, P = _placements()
    x = rnd(4, 6, 9, 8)
    up = (x, [13, 17], "asymmetric")
    yield "upsample batch", ops.upsample_bilinear2d.default, up, [Shard(0)], [Shard(0)]
    yield "upsample channels", ops.upsample_bilinear2d.default, up, [Shard(1)], [Shard(1)]
    yield "upsample partial", ops.upsample_bilinear2d.default, up, [P], [P]
    ugo = rnd(4, 6, 13, 17)
    for pl in (Shard(0), Shard(1), P):
        yield (f"upsample_backward {pl}", ops.upsample_bilinear2d_backward.default, (ugo, [9, 8], "asymmetric"),
               [pl], [pl])


UPSAMPLE_BILINEAR2D = OpInfo(
    name="upsample_bilinear2d",
    op=customops.upsample_bilinear2d,
    ref=_resize_ref,
    sample_inputs=_resize_samples,
    dynamic_samples=_resize_dynamic,
    error_inputs=_resize_errors,
    module=_resize_module,
    backward_args=lambda sample, grad: (grad, list(sample.args[0].shape[-2:]), sample.kwargs["coordinate_mode"]),
    tolerances=dict(_RESIZE_TOLERANCES),
    autocast_samples=_low_precision_first_input(_resize_samples),
    keeps_memory_format=True,
    takes_image=True,
    atomic_backward_decomposition=True,  # customops.inductor's backward: four scatter-adds
    property_tolerance=_resize_property_tolerance,
    cases=_resize_cases,
    property_cost=2.0,
    fuzz_call=_resize_fuzz_call,
    onnx_nodes=_resize_onnx_nodes,
    sharding_cases=_resize_sharding,
)

OPS = [UPSAMPLE_BILINEAR2D]
