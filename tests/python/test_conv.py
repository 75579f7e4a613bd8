"""What the generic op table cannot check for the convolutions: the column
buffer's memory cap, and run-to-run determinism of the reductions."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import customops
from conftest import requires_cuda


def test_conv2d_chunks_under_the_workspace_limit(monkeypatch):
    """With a 1 MiB workspace the batch of 5 goes 2 + 2 + 1 images at a time,
    forward and backward (one column buffer and the weight gradient's per-image
    products); the results (forward and all gradients) must not change."""
    x = torch.randn(5, 16, 20, 20, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, 16, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(8, dtype=torch.float64, requires_grad=True)
    per_image = 16 * 9 * 20 * 20 * 8  # bytes of one image's columns
    partials = 8 * 16 * 9 * 8  # bytes of one image's weight-gradient products
    assert 2**20 // per_image == 2 and 2**20 // (per_image + partials) == 2
    monkeypatch.setenv("CUSTOMOPS_CONV2D_WORKSPACE_MIB", "1")
    y = customops.conv2d(x, w, b, padding=1)
    g = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, w, b), g)
    expected = F.conv2d(x, w, b, padding=1)
    torch.testing.assert_close(y, expected)
    for got, want in zip(grads, torch.autograd.grad(expected, (x, w, b), g)):
        torch.testing.assert_close(got, want)


@requires_cuda
def test_conv2d_peak_memory_stays_under_the_cap():
    """A batch whose columns would take 0.86 GiB runs with at most the 256 MiB
    column buffer (plus the cuBLAS workspace, allocated in the warm-up) beyond
    the inputs and outputs, forward and backward."""
    cap = 256 * 2**20
    x = torch.randn(128, 64, 56, 56, device="cuda")
    w = torch.randn(64, 64, 3, 3, device="cuda")
    assert 64 * 9 * 56 * 56 * 4 * 128 > 3 * cap  # the whole batch's columns, were they built at once
    g = torch.randn(128, 64, 56, 56, device="cuda")
    customops.conv2d(x[:2], w, padding=1)  # warm-up: cuBLAS handle and workspace
    torch.ops.customops.conv2d_backward(g[:2], x[:2], w, [1, 1], [1, 1], [1, 1], 1, [True, True, False])
    torch.cuda.synchronize()

    slack = 16 * 2**20  # a chunk's float sum of the weight-gradient products and allocator rounding
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    y = customops.conv2d(x, w, padding=1)
    torch.cuda.synchronize()
    out_bytes = y.numel() * y.element_size()
    assert torch.cuda.max_memory_allocated() - base - out_bytes <= cap + slack
    del y

    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    gx, gw, _ = torch.ops.customops.conv2d_backward(g, x, w, [1, 1], [1, 1], [1, 1], 1, [True, True, False])
    torch.cuda.synchronize()
    grads = gx.numel() * gx.element_size() + gw.numel() * 4 * 2  # grad_input, weight grad and its float sum
    assert torch.cuda.max_memory_allocated() - base - grads <= cap + slack
    want = torch.ops.aten.convolution_backward(g.double(), x.double(), w.double(), None, [1, 1], [1, 1], [1, 1],
                                               False, [0, 0], 1, [True, True, False])
    for got, ref in zip((gx, gw), want):  # the weight gradient sums 400K products: compare to its scale
        scale = ref.abs().max()
        torch.testing.assert_close(got.double() / scale, ref / scale, rtol=0, atol=1e-5)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_col2im_on_cuda_in_groups_of_pixels(dtype):
    """Each CUDA thread sums 4 or 8 neighbouring pixels of a row: widths that end
    in a partial group, strides and dilations that leave some pixels of a group
    without a window, a 4500-wide row and columns at an odd address. Against
    F.fold in float64, and bit-identical run to run."""
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    cases = [  # (image, kernel_size, dilation, padding, stride)
        ((2, 3, 70, 101), (3, 3), (1, 1), (1, 1), (1, 1)),
        ((1, 4, 45, 99), (3, 5), (2, 1), (2, 3), (2, 3)),
        ((2, 2, 61, 37), (7, 2), (1, 3), (0, 1), (4, 1)),
        ((1, 2, 5, 4500), (3, 3), (1, 1), (1, 1), (1, 1)),
    ]
    for image, k, d, p, s in cases:
        args = {"kernel_size": k, "dilation": d, "padding": p, "stride": s}
        shape = F.unfold(torch.empty(image, device="meta"), **args).shape
        for offset in (0, 1):
            cols = torch.randn(shape.numel() + offset, device="cuda", dtype=dtype)[offset:].view(shape)
            ours = customops.col2im(cols, image[-2:], **args)
            ref = F.fold(cols.double(), image[-2:], **args)
            torch.testing.assert_close(ours.double(), ref, rtol=tol, atol=tol * 9)
            assert torch.equal(ours, customops.col2im(cols, image[-2:], **args))


def _devices():
    return ["cpu", pytest.param("cuda", marks=requires_cuda)]


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("kernel", [3, 7, 31])
def test_depthwise_gradients_are_deterministic(device, kernel):
    """The weight gradient is a fixed-order reduction: bit-identical run to run."""
    x = torch.randn(8, 6, 40, 37, device=device)
    w = torch.randn(12, 1, kernel, kernel, device=device)
    g = torch.randn(8, 12, 40, 37, device=device)
    args = (g, x, w, [1, 1], [kernel // 2] * 2, [1, 1], [True, True, True])
    first = torch.ops.customops.depthwise_conv2d_backward(*args)
    for _ in range(3):
        for a, b in zip(first, torch.ops.customops.depthwise_conv2d_backward(*args)):
            assert torch.equal(a, b)


@pytest.mark.parametrize("device", _devices())
def test_depthwise_weight_gradient_ignores_pixels_its_tap_never_reads(device):
    """Vector kernels whose last lanes run past the row (7 outputs here) must not let a
    pixel that another tap reads leak into this tap's sum: an inf in the last column
    belongs to tap 2's gradient only, and taps 0 and 1 stay finite."""
    x = torch.zeros(1, 1, 1, 9, device=device, dtype=torch.float64)
    x[..., 8] = float("inf")
    w = torch.ones(1, 1, 1, 3, device=device, dtype=torch.float64)
    g = torch.ones(1, 1, 1, 7, device=device, dtype=torch.float64)
    args = (g, x, w, [1, 1], [0, 0], [1, 1], [False, True, False])
    ours = torch.ops.customops.depthwise_conv2d_backward(*args)[1]
    theirs = torch.ops.aten.convolution_backward(g, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                                 [False, True, False])[1]
    assert torch.isfinite(theirs[..., :2]).all()
    torch.testing.assert_close(ours, theirs, equal_nan=True)


# (N, C, H, W, kh, kw, stride, padding, dilation): every C fills at least 3/4 of
# its vectors' lanes in float (8 lanes on AVX2) and double (4), so the CPU
# forward runs blocked over channels (kernels/cpu/depthwise_conv2d_blocked.cpp).
_CHANNEL_BLOCKS = [
    (2, 20, 9, 13, 3, 3, 1, 1, 1),  # last channel block half empty in float
    (1, 16, 56, 56, 7, 7, 1, 3, 1),  # the benchmark's shape, fewer channels
    (1, 24, 11, 17, 3, 5, (2, 3), (1, 2), (2, 1)),  # strided, dilated, asymmetric
    (1, 8, 5, 4, 7, 7, 1, 5, 1),  # padding wider than the image
    (3, 64, 1, 1, 1, 1, 1, 0, 1),  # 1x1 images
    (1, 30, 7, 33, 3, 3, 1, 0, 3),  # one output row; unread input rows
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "noncontiguous"])
@pytest.mark.parametrize("case", _CHANNEL_BLOCKS, ids=lambda c: "x".join(map(str, c[:6])))
def test_depthwise_cpu_forward_in_channel_blocks(case, layout, dtype):
    """The CPU forward blocked over channels (a vector holds one pixel of several
    channels) against ATen: partly empty channel blocks, rows that end inside a block
    of pixels, strides, dilations, wide padding, 1x1 images, any layout."""
    n, c, h, w_, kh, kw, stride, padding, dilation = case
    x = torch.randn(n, c, h, w_ * 2 if layout == "noncontiguous" else w_, dtype=dtype)
    if layout == "noncontiguous":
        x = x[..., ::2]
    elif layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    w = torch.randn(c, 1, kh, kw, dtype=dtype)
    b = torch.randn(c, dtype=dtype)
    y = customops.depthwise_conv2d(x, w, b, stride, padding, dilation)
    expected = F.conv2d(x.double(), w.double(), b.double(), stride, padding, dilation, c).to(dtype)
    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(y, expected, rtol=tol, atol=tol)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_depthwise_large_kernels_on_cuda(dtype):
    """Kernels up to 31x31 (register and tiled paths) and a dilated one (direct path) against
    cuDNN, at a size where tiles repeat in both directions."""
    tol = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}[dtype]
    for k, d in ((5, 1), (15, 1), (31, 1), (7, 3)):
        x = torch.randn(3, 5, 70, 130, device="cuda", dtype=dtype, requires_grad=True)
        w = (torch.randn(10, 1, k, k, device="cuda", dtype=dtype) / k).requires_grad_()
        pad = d * (k // 2)
        y = customops.depthwise_conv2d(x, w, None, 1, pad, d)
        ref = F.conv2d(x.double(), w.double(), None, 1, pad, d, 5)
        torch.testing.assert_close(y.double(), ref, rtol=tol, atol=tol)
        g = torch.randn_like(y)
        got = torch.autograd.grad(y, (x, w), g)
        want = torch.autograd.grad(ref, (x, w), g.double())
        for a, b in zip(got, want):
            scale = b.abs().max().item()
            torch.testing.assert_close(a.double() / scale, b.double() / scale, rtol=tol, atol=tol)


@requires_cuda
@pytest.mark.parametrize("k,padding,m", [(3, (1, 1), 1), (3, (0, 2), 2), (5, (2, 2), 1), (5, (1, 3), 1)])
def test_depthwise_small_kernels_in_runs_of_rows_on_cuda(k, padding, m):
    """3x3 and 5x5 at unit stride take the register kernel; at this size each
    thread walks a run of rows (small tensors get one row a thread) and the
    height ends in a partial run. Forward and input gradient (the transposed
    correlation, with one source channel when m == 1) against cuDNN in float64."""
    x = torch.randn(128, 96, 45, 37, device="cuda", requires_grad=True)
    w = (torch.randn(96 * m, 1, k, k, device="cuda") / k).requires_grad_()
    b = torch.randn(96 * m, device="cuda", requires_grad=True)
    y = customops.depthwise_conv2d(x, w, b, 1, padding)
    ref = F.conv2d(x.double(), w.double(), b.double(), 1, padding, 1, 96)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(y)
    got = torch.autograd.grad(y, (x, w, b), g)
    want = torch.autograd.grad(ref, (x, w, b), g.double())
    for a, e in zip(got, want):
        scale = e.abs().max().item()
        torch.testing.assert_close(a.double() / scale, e.double() / scale, rtol=1e-5, atol=1e-5)
