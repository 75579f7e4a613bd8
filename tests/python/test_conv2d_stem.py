"""conv2d's stem kernels (tensor cores, images of 1-7 channels: forward, input and weight gradients in float16 and
bfloat16, channels_last and NCHW with overlapping windows, and in float32 as TF32, channels_last) against the
explicit path (im2col + cuBLAS) and F.conv2d in float64: the ResNet stem, 3x3 and 4x4 strided stems, grayscale and
7-channel images at unit stride (channels padded to 8), strides of 1 to 16, row dilation, 8x8 filters (a filter
row of 32 elements: two MMA steps), output channels past one block's 64 and not a multiple of 8; NCHW /
channels_last / non-contiguous inputs and weights, every dtype, gradients; which kernels ran, and where the
explicit path takes over (patchify stems and float32 on NCHW memory, float32 without TF32, float64, batch 0,
windows past shared memory)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import customops
from conftest import cuda_kernel_names, requires_cuda
from test_conv2d_grouped import _check_default_and_explicit, _inputs
from test_conv2d_implicit import _check, _check_results, _reference, _run

pytestmark = [requires_cuda, pytest.mark.torch_independent]

# (N, C, H, W, K, (kh, kw), stride, padding, dilation, groups, name,
#  stem kernels for: the forward, the input gradient, the weight gradient)
CASES = [
    (2, 3, 30, 31, 64, (7, 7), 2, 3, 1, 1, "resnet_stem", True, True, True),
    (2, 3, 17, 19, 32, (3, 3), 2, 1, 1, 1, "3x3_stride2", True, True, True),
    (2, 3, 20, 22, 48, (4, 4), 4, 0, 1, 1, "patchify_4x4", True, True, True),
    # One channel: NCHW and channels_last are the same memory and PyTorch's output is NCHW: an NCHW call.
    (2, 1, 16, 15, 16, (5, 5), 1, 2, 1, 1, "grayscale_unit_stride", True, True, True),
    (2, 4, 12, 13, 24, (3, 3), (1, 2), 1, (2, 1), 1, "rgba_dilated_rows", True, True, True),
    (1, 7, 9, 9, 72, (3, 3), 1, 1, 1, 1, "seven_channels_two_slices", True, False, True),  # input grad: K > 64
    (2, 3, 11, 10, 64, (8, 8), 2, 3, 1, 1, "8x8_filter", True, True, True),
    (2, 3, 9, 9, 10, (3, 3), 2, 1, 1, 1, "ten_outputs", True, False, False),  # gradients: K not a multiple of 8
    (2, 3, 12, 12, 16, (7, 7), 1, 3, 1, 1, "7x7_unit_stride", True, True, False),  # weight grad: 28 accumulator sets
    (1, 3, 40, 40, 16, (16, 16), 16, 0, 1, 1, "patchify_16x16", False, True, False),  # window past shared memory
    (2, 3, 8, 8, 16, (3, 3), 1, 1, (1, 2), 1, "column_dilation", False, False, False),
    (0, 3, 8, 8, 16, (3, 3), 2, 1, 1, 1, "batch0", False, False, False),
]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
STEM = ("stem_conv", "stem_input_grad", "stem_weight_grad")


def _case(case):
    return case[:11]  # the grouped tests' case


@pytest.mark.parametrize("layout", ["channels_last", "contiguous", "noncontiguous"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[10])
def test_stem_explicit_and_reference_agree(case, dtype, layout, monkeypatch):
    _check_default_and_explicit(_case(case), dtype, layout, monkeypatch)


def _stem_layout(case, dtype, layout):
    """Whether conv2d gives the stem kernels a call of this layout: channels_last (an image of one channel is NCHW
    as well, and PyTorch's result for it NCHW), and in the half types NCHW where the filter windows overlap (more
    taps than the stride's step: im2col multiplies the image there)."""
    c, ks, stride = case[1], case[5], case[6]
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    half = dtype in (torch.float16, torch.bfloat16)
    return (layout == "channels_last" and c > 1) or (half and ks[0] * ks[1] > sh * sw)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[10])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_stem_kernels_run_where_supported(case, dtype, monkeypatch):
    """Each pass runs its stem kernel (no im2col) on the calls it takes: channels_last ones, and NCHW ones in the
    half types where the windows overlap (not a patchify stem's); float32 without TF32 and
    CUSTOMOPS_CONV2D_ALGO=explicit take the explicit path."""
    *_, forward, input_grad, weight_grad = case
    half = dtype != torch.float32
    for layout in ("channels_last", "contiguous"):
        stem = half and _stem_layout(case, dtype, layout)
        x, weight, bias, window = _inputs(_case(case), dtype, layout)
        y = customops.conv2d(x, weight, bias, *window)
        g = torch.ones_like(y)
        geometry = [[v] * 2 if isinstance(v, int) else list(v) for v in window[:3]]

        def names_of(mask):
            return cuda_kernel_names(lambda: torch.ops.customops.conv2d_backward(g, x, weight, *geometry, 1, mask))

        fwd = cuda_kernel_names(lambda: customops.conv2d(x, weight, bias, *window))
        assert any("stem_conv" in n for n in fwd) == (forward and stem), (layout, fwd)
        if x.shape[0] > 0:
            assert any("im2col" in n for n in fwd) == (not (forward and stem)), (layout, fwd)
        wgrad = names_of([False, True, False])
        assert any("stem_weight_grad" in n for n in wgrad) == (weight_grad and stem), (layout, wgrad)
        dgrad = names_of([True, False, False])
        assert any("stem_input_grad" in n for n in dgrad) == (input_grad and stem), (layout, dgrad)
        if x.shape[0] > 0:
            assert any("col2im" in n for n in dgrad) == (not (input_grad and stem)), (layout, dgrad)
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "explicit")
    names = cuda_kernel_names(lambda: customops.conv2d(x, weight, bias, *window)) + names_of([True, True, True])
    assert not any(s in n for n in names for s in STEM), names


def test_resnet_stem_in_autocast_takes_the_stem_kernels():
    """A channels_last float32 image under float16 autocast (a channels_last mixed-precision training step) reaches
    the stem kernel and matches F.conv2d."""
    x = torch.randn(2, 3, 32, 32, device="cuda").to(memory_format=torch.channels_last)
    w = torch.randn(64, 3, 7, 7, device="cuda") / 12
    with torch.autocast("cuda", dtype=torch.float16):
        y = customops.conv2d(x, w, None, 2, 3)
        names = cuda_kernel_names(lambda: customops.conv2d(x, w, None, 2, 3))
    assert y.dtype == torch.float16 and y.is_contiguous(memory_format=torch.channels_last), y.stride()
    assert any("stem_conv" in n for n in names), names
    _check(y, F.conv2d(x.double(), w.double(), None, 2, 3), torch.float16, "autocast")


@pytest.mark.parametrize("layout", ["channels_last", "contiguous", "noncontiguous"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[10])
def test_stem_tf32_explicit_and_reference_agree(case, layout, tf32, monkeypatch):
    """float32 with TF32 allowed: the stem kernels' TF32 variant where it applies, and the explicit path, agree with
    F.conv2d in float64 to TF32's 10 mantissa bits."""
    x, weight, bias, window = _inputs(_case(case), torch.float32, layout)
    ref, g, ref_grads = _reference(x, weight, bias, window)
    results = {"default": _run(x, weight, bias, window, g)}
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "explicit")
    results["explicit"] = _run(x, weight, bias, window, g)
    _check_results(results, x, layout, ref, ref_grads, torch.float16)  # TF32: 10 mantissa bits, as float16's


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[10])
def test_stem_tf32_kernels_run_where_supported(case, tf32):
    """With TF32 allowed each float32 pass runs the stem kernels' TF32 variant on the channels_last calls the half
    types' kernels take, and the weight gradient of a 3-channel 7x7 filter at unit stride too (float32 pads its
    channels to 4 where the half types pad them to 8: 14 accumulator sets, not 28); NCHW calls (and a one-channel
    image's) stay explicit."""
    *_, forward, input_grad, weight_grad = case
    weight_grad = weight_grad or case[10] == "7x7_unit_stride"
    for layout in ("channels_last", "contiguous"):
        x, weight, bias, window = _inputs(_case(case), torch.float32, layout)
        geometry = [[v] * 2 if isinstance(v, int) else list(v) for v in window[:3]]
        g = torch.ones_like(customops.conv2d(x, weight, bias, *window))
        stem = _stem_layout(case, torch.float32, layout)
        fwd = cuda_kernel_names(lambda: customops.conv2d(x, weight, bias, *window))
        assert any("stem_conv" in n for n in fwd) == (forward and stem), (layout, fwd)
        names = cuda_kernel_names(
            lambda: torch.ops.customops.conv2d_backward(g, x, weight, *geometry, 1, [True, True, False]))
        assert any("stem_input_grad" in n for n in names) == (input_grad and stem), (layout, names)
        assert any("stem_weight_grad_tf32" in n for n in names) == (weight_grad and stem), (layout, names)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["float16", "tf32"])
def test_infinity_outside_every_window_stays_out(dtype, tf32):
    """A pixel no output reads (past the last stride step) may hold an infinity: the kernels' padded reads (the
    next pixels' taps past a filter row, the tile's pixels past the image) must not carry it into the result."""
    x = torch.randn(1, 3, 10, 10, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    x[..., 9] = float("inf")  # 3x3, stride 2, no padding: outputs read columns 0-8
    x[..., 9, :] = float("inf")
    w = torch.randn(16, 3, 3, 3, device="cuda", dtype=dtype)
    assert any("stem_conv" in n for n in cuda_kernel_names(lambda: customops.conv2d(x, w, None, 2, 0)))
    x64 = x[..., :9, :9].double()
    y = customops.conv2d(x, w, None, 2, 0)
    _check(y, F.conv2d(x64, w.double(), None, 2, 0), torch.float16, "forward")
    g = torch.randn_like(y)
    grad_w = torch.ops.customops.conv2d_backward(g, x, w, [2, 2], [0, 0], [1, 1], 1, [False, True, False])[1]
    want = torch.nn.grad.conv2d_weight(x64, w.shape, g.double(), 2, 0)
    assert torch.isfinite(grad_w).all()
    _check(grad_w, want, torch.float16, "weight gradient")

    # Column 5 is read by output column 2 (input columns 4-6); output column 1 (2-4) reads it only through the
    # padding of its filter row's MMA step, which must be masked.
    x = torch.randn(1, 3, 9, 9, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    x[..., 5] = float("inf")
    y = customops.conv2d(x, w, None, 2, 0)
    want = F.conv2d(x.double(), w.double(), None, 2, 0)
    assert not torch.isfinite(y[..., 2]).any()
    others = [0, 1, 3]
    assert torch.isfinite(y[..., others]).all()
    _check(y[..., others], want[..., others], torch.float16, "forward next to an infinity")
