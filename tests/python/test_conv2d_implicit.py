"""conv2d's implicit-GEMM path (CUTLASS, sm_90) against its explicit path (im2col + cuBLAS) and against
F.conv2d in float64: strides, padding, dilation, asymmetric kernels, 1x1 images, batch 0, channel counts on
both sides of the alignment the implicit kernels need, NCHW / channels_last / non-contiguous inputs, every
dtype, gradients; which path ran (the profiler's kernel names); its memory (no column buffer).
CUSTOMOPS_CONV2D_ALGO=explicit selects the explicit path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import customops
from conftest import cuda_kernel_names, requires_cuda

pytestmark = [requires_cuda, pytest.mark.torch_independent]


def _implicit_available() -> bool:
    return (torch.cuda.is_available() and customops.build_info().get("sm90_conv", False)
            and torch.cuda.get_device_capability() == (9, 0))


requires_implicit = pytest.mark.skipif(not _implicit_available(),
                                       reason="needs the sm_90a implicit-GEMM kernels and a compute capability 9.0 GPU")

# (N, C, H, W, K, (kh, kw), stride, padding, dilation, name)
CASES = [
    (2, 16, 12, 12, 32, (3, 3), 1, 1, 1, "3x3"),
    (3, 8, 17, 23, 16, (3, 5), (2, 1), (1, 2), (1, 2), "asymmetric_strided_dilated"),
    (2, 32, 9, 9, 64, (1, 1), 1, 0, 1, "pointwise"),
    (2, 16, 14, 14, 128, (1, 1), 2, 0, 1, "pointwise_stride2"),
    (2, 16, 28, 28, 24, (7, 7), 2, 3, 1, "7x7_stride2"),
    (2, 8, 9, 9, 8, (3, 3), 1, 0, 1, "unpadded"),
    (1, 64, 1, 1, 32, (1, 1), 1, 0, 1, "1x1_image"),
    (2, 16, 5, 5, 16, (5, 5), 1, 0, 1, "output_1x1"),
    (0, 16, 6, 6, 16, (3, 3), 1, 1, 1, "batch0"),
    (1, 16, 10, 12, 200, (3, 3), 1, 4, 1, "padding_gt_kernel_wide_k"),
    (2, 24, 20, 20, 16, (3, 3), 1, 2, 2, "dilated"),
    (2, 6, 10, 10, 16, (3, 3), 1, 1, 1, "c6_unaligned"),
    (2, 16, 10, 10, 12, (3, 3), 1, 1, 1, "k12_unaligned_for_half"),
    (2, 12, 10, 10, 20, (3, 3), 1, 1, 1, "c12_k20_aligned_for_float_only"),
]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TOL = {torch.float16: 1e-2, torch.bfloat16: 4e-2, torch.float32: 1e-5, torch.float64: 1e-10}


def _inputs(case, dtype, layout):
    n, c, h, w, k, ks, stride, padding, dilation, _ = case
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    elif layout == "noncontiguous":
        x = torch.randn(n, c, h, 2 * w, device="cuda", dtype=dtype)[..., ::2]
    weight = (torch.randn(k, c, *ks, device="cuda", dtype=dtype) / (c * ks[0] * ks[1]) ** 0.5)
    if layout == "channels_last":
        weight = weight.to(memory_format=torch.channels_last)
    bias = torch.randn(k, device="cuda", dtype=dtype)
    return x, weight, bias, (stride, padding, dilation)


def _check(got, want, dtype, what):
    assert got.shape == want.shape, what
    if want.numel() == 0:
        return
    # Relative to the result's scale: half-precision outputs round to ~3 significant digits.
    scale = want.abs().max().clamp_min(1.0)
    torch.testing.assert_close(got.double() / scale, want / scale, rtol=0, atol=TOL[dtype], msg=what)


def _reference(x, weight, bias, window):
    """F.conv2d in float64, a random grad_out in x's dtype, and the float64 gradients for it."""
    ref = F.conv2d(x.double(), weight.double(), bias.double(), *window)
    g = torch.randn_like(ref).to(x.dtype)
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, weight, bias))
    yd = F.conv2d(xd, wd, bd, *window)
    ref_grads = torch.autograd.grad(yd, (xd, wd, bd), g.double()) if yd.numel() else (None, None, None)
    return ref, g, ref_grads


def _check_results(results, x, layout, ref, ref_grads, tol_dtype):
    """Each algorithm's output and gradients: dtype, shape, values (each against its own scale: the weight
    gradient sums N*P*Q products) and memory format (PyTorch's rule: channels_last out for a channels_last input
    that is not also contiguous, as batch 0 or 1x1 images are)."""
    expected_format = torch.channels_last if layout == "channels_last" and not x.is_contiguous() else \
        torch.contiguous_format
    for algo, (out, grads) in results.items():
        assert out.dtype == x.dtype and out.shape == ref.shape
        assert out.is_contiguous(memory_format=expected_format), f"{algo} output format"
        _check(out, ref, tol_dtype, f"{algo} forward")
        if out.numel() == 0:
            continue
        for got, want, name in zip(grads, ref_grads, ("input", "weight", "bias")):
            assert got.dtype == x.dtype and got.shape == want.shape
            _check(got, want, tol_dtype, f"{algo} grad {name}")
        assert grads[0].is_contiguous(memory_format=expected_format), f"{algo} input-gradient format"


def _run(x, weight, bias, window, g):
    x = x.detach().requires_grad_()
    weight = weight.detach().requires_grad_()
    bias = bias.detach().requires_grad_()
    y = customops.conv2d(x, weight, bias, *window)
    grads = torch.autograd.grad(y, (x, weight, bias), g) if y.numel() else (None, None, None)
    return y, grads


@pytest.mark.parametrize("tf32", [False, True], ids=["ieee", "tf32"])
@pytest.mark.parametrize("layout", ["channels_last", "contiguous", "noncontiguous"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
def test_implicit_explicit_and_reference_agree(case, dtype, layout, tf32, monkeypatch):
    if tf32 and dtype != torch.float32:
        pytest.skip("TF32 concerns float32 only")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        x, weight, bias, window = _inputs(case, dtype, layout)
        ref, g, ref_grads = _reference(x, weight, bias, window)

        results = {}
        for algo in ("default", "implicit", "explicit"):  # implicit: NCHW calls converted to channels_last too
            if algo != "default":
                monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", algo)
            results[algo] = _run(x, weight, bias, window, g)
            monkeypatch.delenv("CUSTOMOPS_CONV2D_ALGO", raising=False)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False

    _check_results(results, x, layout, ref, ref_grads, torch.float16 if tf32 else dtype)  # TF32: 10 mantissa bits


# CUTLASS's convolution kernels, by a word of their (possibly mangled) names; cuBLAS's GEMMs on the explicit
# path may carry "cutlass" in theirs too.
_IMPLICIT = "ConvUniversal"


@requires_implicit
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_implicit_path_runs_where_supported(dtype, monkeypatch):
    """Forward and unit-stride input gradient of an aligned half-precision channels_last conv run CUTLASS
    kernels and no im2col/col2im, and so does the weight gradient under CUSTOMOPS_CONV2D_ALGO=implicit (by
    default these few channels take the direct kernel, test_conv2d_half_wgrad.py); =explicit runs the fold
    kernels instead."""
    x, weight, bias, window = _inputs(CASES[0], dtype, "channels_last")
    g = torch.randn(2, 32, 12, 12, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)

    def step():
        customops.conv2d(x, weight, bias, *window)
        torch.ops.customops.conv2d_backward(g, x, weight, [1, 1], [1, 1], [1, 1], 1, [True, False, False])

    def weight_grad():
        torch.ops.customops.conv2d_backward(g, x, weight, [1, 1], [1, 1], [1, 1], 1, [False, True, False])

    names = cuda_kernel_names(step)
    assert sum(_IMPLICIT in n for n in names) == 2, names
    assert not any("im2col" in n or "col2im" in n for n in names), names
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "implicit")
    names = cuda_kernel_names(weight_grad)
    assert any(_IMPLICIT in n for n in names) and not any("im2col" in n for n in names), names
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "explicit")
    names = cuda_kernel_names(step) + cuda_kernel_names(weight_grad)
    assert not any(_IMPLICIT in n for n in names), names
    assert any("im2col" in n for n in names) and any("col2im" in n for n in names), names


@requires_implicit
def test_fallback_boundary(monkeypatch):
    """Unaligned channels, groups, float32 without TF32, float64, strided input gradients and TF32 input gradients
    padded beyond the kernel stay explicit; so do 1x1 unit-stride convolutions (plain GEMMs), unless
    CUSTOMOPS_CONV2D_ALGO=implicit. NCHW inputs run the implicit kernels through conversions."""
    def cutlass_kernels(dtype, c, k, groups=1, stride=1, tf32=False, layout=torch.channels_last, ks=3, pad=None):
        x = torch.randn(2, c, 10, 10, device="cuda", dtype=dtype).to(memory_format=layout)
        w = torch.randn(k, c // groups, ks, ks, device="cuda", dtype=dtype)
        pad = ks // 2 if pad is None else pad
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            y = customops.conv2d(x, w, None, stride, pad, 1, groups)
            names = cuda_kernel_names(lambda: torch.ops.customops.conv2d_backward(
                torch.ones_like(y), x, w, [stride] * 2, [pad] * 2, [1, 1], groups, [True, False, False]))
            names += cuda_kernel_names(lambda: customops.conv2d(x, w, None, stride, pad, 1, groups))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        return sum(_IMPLICIT in n for n in names)

    assert cutlass_kernels(torch.float16, 16, 16) == 2
    assert cutlass_kernels(torch.float16, 12, 16) == 0  # C not a multiple of 8
    assert cutlass_kernels(torch.float16, 16, 12) == 0  # K not a multiple of 8
    assert cutlass_kernels(torch.float16, 32, 32, groups=2) == 0
    assert cutlass_kernels(torch.float16, 16, 16, stride=2) == 1  # forward only
    assert cutlass_kernels(torch.float32, 12, 12) == 0  # no TF32
    assert cutlass_kernels(torch.float32, 12, 12, tf32=True) == 2  # the input gradient as a flipped forward
    assert cutlass_kernels(torch.float32, 12, 12, tf32=True, stride=2) == 1  # forward only
    assert cutlass_kernels(torch.float32, 12, 12, tf32=True, ks=1, pad=1) == 1  # pad > kernel - 1: forward only
    assert cutlass_kernels(torch.float64, 16, 16) == 0
    assert cutlass_kernels(torch.float16, 16, 16, layout=torch.contiguous_format) == 2
    assert cutlass_kernels(torch.float16, 16, 16, ks=1) == 1  # the forward; cuBLAS the input gradient
    assert cutlass_kernels(torch.float16, 16, 16, ks=1, layout=torch.contiguous_format) == 0
    assert cutlass_kernels(torch.float16, 16, 16, ks=1, stride=2) == 1  # forward (strided: no input gradient)
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "implicit")
    assert cutlass_kernels(torch.float16, 16, 16, ks=1) == 2


# Shapes whose plans reach every implicit kernel configuration (kernels/cuda/conv2d/implicit_*_sm90.cu; the weight
# gradient's tile and batch chunks from plan_weight_grad in conv2d.cu): (N, C, H=W, K, weight-gradient launches).
PLAN_CASES = [
    (2, 16, 12, 32, 1),    # narrow forward and input-gradient tiles; 64x64 weight-gradient tiles
    (2, 256, 10, 256, 1),  # wide tiles in pairs (two channel tiles); 128x64 weight-gradient tiles
    (2, 384, 6, 384, 1),   # wide tiles alone (three channel tiles); 128x128 weight-gradient tiles
    (6, 256, 64, 256, 3),  # 128x128 weight-gradient tiles over three batch chunks, summed
    (2, 200, 9, 136, 1),   # channel counts that leave partial tiles
]


@requires_implicit
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", PLAN_CASES, ids=lambda c: "n{}_c{}_h{}_k{}".format(*c[:4]))
def test_tile_plans_against_float32(case, dtype, monkeypatch):
    """Every tile configuration's forward and gradients against cuDNN in float32 (TF32 off), and the weight
    gradient's launch count (its batch chunks); CUSTOMOPS_CONV2D_ALGO=implicit keeps the weight gradients of few
    channels on CUTLASS's kernel too."""
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "implicit")
    n, c, h, k, launches = case
    x = torch.randn(n, c, h, h, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    w = (torch.randn(k, c, 3, 3, device="cuda", dtype=dtype) / (9 * c) ** 0.5).to(memory_format=torch.channels_last)
    g = torch.randn(n, k, h, h, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    win = ([1, 1], [1, 1], [1, 1])
    y = customops.conv2d(x, w, None, 1, 1)
    gx, gw, _ = torch.ops.customops.conv2d_backward(g, x, w, *win, 1, [True, True, False])
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        ref = F.conv2d(x.float(), w.float(), None, 1, 1)
        ref_gx, ref_gw, _ = torch.ops.aten.convolution_backward(g.float(), x.float(), w.float(), None, *win, False,
                                                                [0, 0], 1, [True, True, False])
    finally:
        torch.backends.cudnn.allow_tf32 = old
    for got, want, what in ((y, ref, "forward"), (gx, ref_gx, "input grad"), (gw, ref_gw, "weight grad")):
        scale = want.abs().max()
        torch.testing.assert_close(got.float() / scale, want / scale, rtol=0, atol=TOL[dtype], msg=what)
    names = cuda_kernel_names(lambda: torch.ops.customops.conv2d_backward(g, x, w, *win, 1, [False, True, False]))
    assert sum(_IMPLICIT in name for name in names) == launches, names


@requires_implicit
def test_implicit_forward_needs_no_column_buffer():
    """The implicit forward and gradients allocate their outputs (and the weight gradient's float32 partial
    sums), never a column buffer (9x the input for a 3x3 conv). These 64 channels' weight gradient runs the direct
    kernel (test_conv2d_half_wgrad.py), one 64 x 64 x 9 tile split over the pixels in about one chunk an SM: its
    partial sums (128 x 147 KiB on an H100) stay below the input's size."""
    x = torch.randn(64, 64, 56, 56, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16)
    g = torch.randn_like(x)
    customops.conv2d(x[:2], w, padding=1)  # warm-up
    torch.cuda.synchronize()
    slack = 4 * 2**20
    for fn in (lambda: customops.conv2d(x, w, padding=1),
               lambda: torch.ops.customops.conv2d_backward(g, x, w, [1, 1], [1, 1], [1, 1], 1, [True, False, False]),
               lambda: torch.ops.customops.conv2d_backward(g, x, w, [1, 1], [1, 1], [1, 1], 1, [False, True, False])[1]):
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = fn()
        torch.cuda.synchronize()
        out = out if isinstance(out, torch.Tensor) else out[0]
        partials = x.numel() * x.element_size() if out.shape == w.shape else 0
        assert torch.cuda.max_memory_allocated() - base <= out.numel() * out.element_size() + partials + slack
        del out


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_pointwise_channels_last_is_one_gemm_without_copies(dtype):
    """The gradients of a 1x1 unit-stride convolution of a channels_last batch multiply the NHWC memory as it is
    (cuBLAS), and so does its forward where the implicit kernels do not run: no im2col, no NCHW copy of the
    input or grad_out (peak memory: the results alone), on any GPU."""
    x = torch.randn(8, 64, 32, 32, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(32, 64, 1, 1, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    b = torch.randn(32, device="cuda", dtype=dtype)
    g = torch.randn(8, 32, 32, 32, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    fwd = lambda: customops.conv2d(x, w, b)  # noqa: E731
    bwd = lambda: torch.ops.customops.conv2d_backward(g, x, w, [1, 1], [0, 0], [1, 1], 1, [True, True, True])  # noqa: E731
    names = cuda_kernel_names(fwd)
    assert not any("im2col" in n for n in names), names
    names = cuda_kernel_names(bwd)
    assert not any("im2col" in n or _IMPLICIT in n for n in names), names
    fwd(), bwd()  # warm-up (cuBLAS workspace)
    torch.cuda.synchronize()
    slack = 2**20
    for fn in (fwd, bwd):
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = fn()
        torch.cuda.synchronize()
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        assert torch.cuda.max_memory_allocated() - base <= sum(o.numel() * o.element_size() for o in outs) + slack
        del out, outs
    y = fwd()
    gx, gw, gb = bwd()
    assert y.is_contiguous(memory_format=torch.channels_last) and gx.is_contiguous(memory_format=torch.channels_last)
    assert gw.is_contiguous(memory_format=torch.channels_last)  # weight's format, as PyTorch's
    ref = F.conv2d(x.double(), w.double(), b.double())
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    want = torch.autograd.grad(F.conv2d(xd, wd, bd), (xd, wd, bd), g.double())
    for got, exp, what in zip((y, gx, gw, gb), (ref,) + want, ("forward", "input", "weight", "bias")):
        _check(got, exp, torch.float16 if dtype == torch.float16 else torch.float32, what)


# NCHW half-type calls go through kernels/cuda/common/memory_format.cu's transposes to NHWC and back: the 64 x 64 tile of
# 4-byte words where both transposed sizes are even and the memory 4-byte aligned, the 32 x 32 tile of elements
# otherwise. (C, H, W, element offset of the input in its storage, what it exercises)
TRANSPOSE_CASES = [
    (16, 10, 12, 0, "words"),
    (32, 33, 70, 0, "words_partial_tiles"),
    (128, 66, 66, 0, "words_many_tiles"),
    (16, 9, 7, 0, "elements_odd_plane"),
    (16, 10, 12, 1, "elements_2_byte_aligned"),
]


@pytest.mark.parametrize("groups", [1, 4])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=lambda c: c[-1])
def test_nchw_half_types_through_the_transposes(case, dtype, groups):
    if groups == 1 and not _implicit_available():
        pytest.skip("one group takes the transposes on the implicit path only")
    c, h, w, offset, _ = case
    n = 2
    storage = torch.randn(offset + n * c * h * w, device="cuda", dtype=dtype)
    x = storage[offset:].view(n, c, h, w)
    assert x.is_contiguous() and x.storage_offset() == offset
    weight = torch.randn(32, c // groups, 3, 3, device="cuda", dtype=dtype) / (9 * c // groups) ** 0.5
    bias = torch.randn(32, device="cuda", dtype=dtype)
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, weight, bias))
    ref = F.conv2d(xd, wd, bd, 1, 1, 1, groups)
    g = torch.randn_like(ref).to(dtype)
    ref_grads = torch.autograd.grad(ref, (xd, wd, bd), g.double())
    xg, wg, bg = (t.detach().requires_grad_() for t in (x, weight, bias))
    y = customops.conv2d(xg, wg, bg, 1, 1, 1, groups)
    grads = torch.autograd.grad(y, (xg, wg, bg), g)
    assert y.is_contiguous() and grads[0].is_contiguous()
    _check(y, ref, dtype, "forward")
    for got, want, name in zip(grads, ref_grads, ("input", "weight", "bias")):
        _check(got, want, dtype, f"grad {name}")
