"""What the generic op table cannot check for the convolutions: the column
buffer's memory cap, and run-to-run determinism of the reductions."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import customops
from conftest import cuda_kernel_names, requires_cuda

# Tests of customops' own kernels: the rule of customops.backends must not hand their shapes to PyTorch.
pytestmark = [pytest.mark.usefixtures("customops_kernels"), pytest.mark.torch_independent]


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
# forward runs blocked over channels (kernels/cpu/depthwise_conv2d/blocked.cpp).
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


# Strided and dilated windows on CUDA: the input gradients gather only the taps
# that read each pixel (TapWalk), and 3x3/5x5 weight gradients keep every tap's
# sum in registers (small_weight_grad_kernel), at any stride. (C, H, W, m, k,
# stride, padding, dilation): planes down to 1x1, odd sizes, channel counts on
# both sides of a whole 4-lane word, rows of more than one block of threads.
_STRIDED = [
    (8, 17, 19, 1, 3, 2, 1, 1),
    (12, 16, 16, 1, 3, 2, 0, 1),
    (6, 9, 11, 2, 3, (2, 1), (1, 0), 1),
    (5, 13, 12, 1, 5, (1, 2), 2, 1),
    (16, 14, 15, 1, 5, 2, 2, (2, 1)),
    (7, 7, 7, 3, 3, 3, 1, 2),
    (24, 7, 7, 1, 3, 1, 1, 1),  # a small plane at unit stride
    (4, 1, 1, 1, 3, 2, 1, 1),
    (4, 6, 600, 1, 3, 2, 1, 1),  # output rows wider than a block of threads
    (10, 11, 8, 1, (3, 5), 2, (1, 2), 1),  # not square: the direct weight gradient
]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", _STRIDED, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_depthwise_strided_on_cuda(case, layout, dtype):
    """Forward, input, weight and bias gradients against ATen in float64 on the
    same rounded values, for both memory formats."""
    c, h, w_, m, k, stride, padding, dilation = case
    k = k if isinstance(k, tuple) else (k, k)
    mf = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x = torch.randn(3, c, h, w_, device="cuda", dtype=dtype).to(memory_format=mf)
    w = torch.randn(c * m, 1, *k, device="cuda", dtype=dtype)
    b = torch.randn(c * m, device="cuda", dtype=dtype)
    y = customops.depthwise_conv2d(x, w, b, stride, padding, dilation)
    ref = F.conv2d(x.cpu().double(), w.cpu().double(), b.cpu().double(), stride, padding, dilation, c)
    assert y.is_contiguous(memory_format=mf) or y.numel() == 0
    _assert_close_scaled(y.cpu(), ref, _NHWC_TOL[dtype])
    g = torch.randn(ref.shape, device="cuda", dtype=dtype).to(memory_format=mf)
    s, p, d = (torch.nn.modules.utils._pair(v) for v in (stride, padding, dilation))
    got = torch.ops.customops.depthwise_conv2d_backward(g, x, w, s, p, d, [True, True, True])
    want = torch.ops.aten.convolution_backward(g.cpu().double(), x.cpu().double(), w.cpu().double(), [c * m], s, p, d,
                                               False, [0, 0], c, [True, True, True])
    for a, e in zip(got, want):
        assert a.dtype == dtype
        _assert_close_scaled(a.cpu(), e, _NHWC_TOL[dtype])


# Small NCHW weight gradients by each of its kernels, every block resident at once: (N, C, H, W, k, stride, padding,
# dilation) for the register kernel (3x3), the tiles (7x7 on a wide plane), the one-block-per-tap kernel (dilated
# rows); batches of one chunk and of several.
_NCHW_WGRAD = [
    (2, 8, 20, 20, 3, 1, 1, 1),
    (4, 16, 7, 7, 3, 2, 1, 1),
    (2, 6, 33, 70, 7, 1, 3, 1),
    (1, 2, 18, 19, 7, 1, 6, 2),
]


@requires_cuda
@pytest.mark.parametrize("case", _NCHW_WGRAD, ids=lambda c: "-".join(map(str, c)))
def test_depthwise_nchw_weight_gradient_in_one_launch(case):
    """Where its blocks are all resident at once, the NCHW weight gradient sums its chunks' parts in the kernel that
    made them (a grid-wide barrier): one launch, as cuDNN's; the sums are ATen's in float64 and bit-identical run to
    run."""
    n, c, h, w_, k, stride, padding, dilation = case
    x = torch.randn(n, c, h, w_, device="cuda")
    w = torch.randn(c, 1, k, k, device="cuda")
    out = F.conv2d(x, w, None, stride, padding, dilation, c)
    g = torch.randn_like(out)
    win = ([stride] * 2, [padding] * 2, [dilation] * 2)

    def wgrad():
        return torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, [False, True, False])[1]

    assert len(cuda_kernel_names(wgrad)) == 1
    first = wgrad()
    want = torch.ops.aten.convolution_backward(g.double(), x.double(), w.double(), None, *win, False, [0, 0], c,
                                               [False, True, False])[1]
    scale = want.abs().max().item()
    torch.testing.assert_close(first.double() / scale, want / scale, rtol=1e-5, atol=1e-5)
    assert torch.equal(first, wgrad())


@requires_cuda
def test_depthwise_nchw_weight_gradient_in_a_cuda_graph():
    """The one-launch weight gradient is a cooperative launch: captured in a CUDA graph, a replay on new values
    gives what an eager call gives."""
    x = torch.randn(16, 6, 33, 70, device="cuda")
    w = torch.randn(6, 1, 3, 3, device="cuda")
    g = torch.randn(16, 6, 33, 70, device="cuda")
    win = ([1, 1], [1, 1], [1, 1])
    mask = [True, True, True]
    torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, mask)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, mask)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        g.copy_(torch.randn_like(g))
        graph.replay()
        for got, want in zip(captured, torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, mask)):
            assert torch.equal(got, want)


@requires_cuda
def test_depthwise_strided_input_gradient_of_unaligned_channels_last_gradient():
    """A channels_last output gradient that starts one element past a word
    boundary takes the lane-by-lane loads; the result is the same."""
    x = torch.randn(2, 16, 15, 13, device="cuda").to(memory_format=torch.channels_last)
    w = torch.randn(16, 1, 3, 3, device="cuda")
    base = torch.randn(2 * 16 * 8 * 7 + 1, device="cuda")
    g = base[1:].view(2, 8, 7, 16).permute(0, 3, 1, 2)
    assert g.is_contiguous(memory_format=torch.channels_last) and g.data_ptr() % 16 != 0
    got = torch.ops.customops.depthwise_conv2d_backward(g, x, w, [2, 2], [1, 1], [1, 1], [True, False, False])[0]
    want = torch.ops.customops.depthwise_conv2d_backward(g.clone(), x, w, [2, 2], [1, 1], [1, 1],
                                                         [True, False, False])[0]
    ref = torch.ops.aten.convolution_backward(g.cpu().double(), x.cpu().double(), w.cpu().double(), None, [2, 2],
                                              [1, 1], [1, 1], False, [0, 0], 16, [True, False, False])[0]
    torch.testing.assert_close(got, want)
    _assert_close_scaled(got.cpu(), ref, 2e-5)


# The input gradient by stride periods (period_dgrad.cu): square 3x3, 5x5 and 7x7 windows at stride 2. (C, H, W,
# k, padding): odd and even planes, no padding (timm's "same" layers pad before the convolution), padding past the
# window's centre, planes narrower than the window, and enough planes that a thread walks several period rows, the
# last of its column a partial run; odd channel counts (channels_last: a channel a word) and even ones (two).
_PERIODS = [(8, 17, 19, 3, 1), (6, 16, 16, 3, 0), (5, 13, 12, 5, 2), (4, 14, 15, 5, 0), (3, 11, 9, 7, 3),
            (4, 4, 5, 7, 6), (2, 3, 2, 5, 4), (96, 33, 30, 3, 1)]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", _PERIODS, ids=lambda c: "-".join(map(str, c)))
def test_depthwise_input_gradient_by_stride_periods_on_cuda(case, layout, dtype):
    """The kernel runs (by name) where it applies (channels_last: 3x3, and 5x5 on pixels that are not whole 16-byte
    words) and the result matches ATen's input gradient in float64 on the same rounded values, in the input's
    layout."""
    c, h, w_, k, padding = case
    n = 64 if c > 8 else 16
    mf = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x = torch.randn(n, c, h, w_, device="cuda", dtype=dtype).to(memory_format=mf)
    w = torch.randn(c, 1, k, k, device="cuda", dtype=dtype)
    oh, ow = ((size + 2 * padding - k) // 2 + 1 for size in (h, w_))
    g = torch.randn(n, c, oh, ow, device="cuda", dtype=dtype).to(memory_format=mf)
    win = ([2, 2], [padding, padding], [1, 1])

    def run():
        return torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, [True, False, False])[0]

    with customops.backends.use("depthwise_conv2d", "customops"):
        names = cuda_kernel_names(run)
        got = run()
    applies = layout == "contiguous" or k == 3 or (k == 5 and c * x.element_size() % 16 != 0)
    assert any("period_input_grad_kernel" in name for name in names) == applies, names
    want = torch.ops.aten.convolution_backward(g.cpu().double(), x.cpu().double(), w.cpu().double(), None, *win,
                                               False, [0, 0], c, [True, False, False])[0]
    assert got.dtype == dtype and got.is_contiguous(memory_format=mf)
    _assert_close_scaled(got.cpu(), want, _NHWC_TOL[dtype])


# --- CPU channels_last (kernels/cpu/depthwise_conv2d/nhwc*.cpp) ------------------

# (N, C, H, W, m, (kh, kw), stride, padding, dilation). C covers one partial
# vector (3, 13: staged rows of whole vectors), whole vectors of float and double
# (8, 16, 96: read in place in those dtypes) and multipliers 1, 2 and 3.
_NHWC = [
    (2, 8, 9, 11, 1, (3, 3), 1, 1, 1),
    (2, 16, 15, 17, 1, (7, 7), 1, 3, 1),  # full pixels 8 at a time, then 4, 2, 1
    (1, 96, 12, 13, 1, (5, 5), 1, 2, 1),
    (1, 16, 40, 37, 1, (31, 31), 1, 15, 1),
    (2, 3, 10, 7, 2, (5, 5), (2, 1), (2, 3), 1),
    (1, 13, 12, 15, 3, (7, 7), 1, 3, (2, 1)),
    (2, 96, 7, 9, 1, (3, 5), 2, (1, 2), 1),
    (1, 16, 11, 13, 2, (3, 3), 3, 4, 2),  # input rows and columns that no window reads
    (1, 13, 5, 6, 1, (3, 3), 1, 5, 1),  # padding wider than kernel and image
    (1, 8, 6, 23, 1, (1, 5), (1, 3), (0, 2), (1, 2)),
    (3, 8, 1, 1, 2, (1, 1), 1, 0, 1),  # 1x1 images
    (2, 8, 1, 1, 1, (3, 3), 1, 1, 1),  # 1x1 images, every tap but the centre outside
    (1, 3, 10, 10, 1, (1, 1), 3, 0, 1),  # pixels between strides get zero gradient
    (1, 24, 8, 19, 1, (3, 3), (1, 2), 1, (3, 1)),
    (2, 16, 9, 60, 1, (3, 3), 1, 1, 1),  # wide rows: blocks clear of both borders
    (1, 16, 5, 13, 1, (3, 3), 1, 1, 1),  # 11 pixels clear of the borders: blocks of 6 and 5
    (1, 24, 10, 50, 2, (7, 7), 1, 3, 1),
    (1, 16, 8, 45, 1, (5, 5), 1, 2, 1),
    (1, 8, 6, 45, 1, (9, 4), 1, (4, 1), 1),  # tap rows of a width without a kernel of its own
    # Column stride 2 with at most 3 tap columns: the forward's row blocks of pixels two columns apart.
    (2, 16, 9, 31, 1, (3, 3), 2, 1, 1),  # blocks clear of both borders, the edge pixels as term lists
    (1, 13, 6, 40, 1, (3, 2), (1, 2), (1, 0), 1),  # no padding: every pixel in blocks; 13 channels staged
    (1, 8, 5, 12, 1, (3, 3), 2, 1, 1),  # 6 pixels a row, too few clear of the borders: clipped blocks
]

_NHWC_TOL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def _assert_close_scaled(got, want, tol):
    """Against a float64 reference, errors relative to the largest value (sums of
    many products of mixed signs have no meaningful per-element relative error)."""
    scale = max(want.abs().max().item(), 1.0)
    torch.testing.assert_close(got.double() / scale, want / scale, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", _NHWC, ids=lambda c: "-".join(map(str, c)).replace(" ", ""))
def test_depthwise_cpu_channels_last(case, dtype):
    """Forward, input, weight and bias gradients of channels_last tensors against
    ATen in float64 on the same (rounded) values; output and input gradient stay
    channels_last."""
    n, c, h, w_, m, k, stride, padding, dilation = case
    x = torch.randn(n, c, h, w_, dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(c * m, 1, *k, dtype=dtype)
    b = torch.randn(c * m, dtype=dtype)
    y = customops.depthwise_conv2d(x, w, b, stride, padding, dilation)
    ref = F.conv2d(x.double(), w.double(), b.double(), stride, padding, dilation, c)
    assert y.dtype == dtype and y.shape == ref.shape
    assert y.is_contiguous(memory_format=torch.channels_last)
    _assert_close_scaled(y, ref, _NHWC_TOL[dtype])

    g = torch.randn(ref.shape, dtype=dtype).to(memory_format=torch.channels_last)
    s, p, d = (torch.nn.modules.utils._pair(v) for v in (stride, padding, dilation))
    got = torch.ops.customops.depthwise_conv2d_backward(g, x, w, s, p, d, [True, True, True])
    want = torch.ops.aten.convolution_backward(g.double(), x.double(), w.double(), [c * m], s, p, d, False, [0, 0],
                                               c, [True, True, True])
    assert got[0].is_contiguous(memory_format=torch.channels_last)
    assert got[1].shape == w.shape and got[1].is_contiguous()
    for a, e in zip(got, want):
        assert a.dtype == dtype
        _assert_close_scaled(a, e, _NHWC_TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_depthwise_cpu_channels_last_independent_of_threads(dtype):
    """Forward and gradients bit-identical on one thread and on two: the weight
    gradient's chunks of rows depend on the shapes only."""
    x = torch.randn(4, 24, 30, 29, dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(48, 1, 5, 5, dtype=dtype)
    b = torch.randn(48, dtype=dtype)
    g = torch.randn(4, 48, 30, 29, dtype=dtype).to(memory_format=torch.channels_last)

    def run():
        y = customops.depthwise_conv2d(x, w, b, 1, 2)
        grads = torch.ops.customops.depthwise_conv2d_backward(g, x, w, [1, 1], [2, 2], [1, 1], [True, True, True])
        return (y, *grads)

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run()
        torch.set_num_threads(2)
        two = run()
    finally:
        torch.set_num_threads(threads)
    for a, e in zip(one, two):
        assert torch.equal(a, e)


def test_depthwise_cpu_permuted_nhwc_input():
    """A permuted NHWC tensor (as ConvNeXt blocks hand on) is channels_last:
    the result and the input gradient come back channels_last and right."""
    x0 = torch.randn(2, 12, 9, 16, dtype=torch.float64)
    x = x0.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2).requires_grad_()
    assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
    w = torch.randn(24, 1, 7, 7, dtype=torch.float64, requires_grad=True)
    y = customops.depthwise_conv2d(x, w, None, 1, 3)
    assert y.is_contiguous(memory_format=torch.channels_last)
    ref = F.conv2d(x0, w.detach(), None, 1, 3, 1, 12)
    torch.testing.assert_close(y.detach(), ref)
    g = torch.randn_like(ref)
    gx, gw = torch.autograd.grad(y, (x, w), g)
    assert gx.is_contiguous(memory_format=torch.channels_last)
    x1, w1 = x0.clone().requires_grad_(), w.detach().clone().requires_grad_()
    for a, e in zip((gx, gw), torch.autograd.grad(F.conv2d(x1, w1, None, 1, 3, 1, 12), (x1, w1), g)):
        torch.testing.assert_close(a, e)


def test_depthwise_cpu_channels_last_empty_batch():
    """A batch of 0 asked for in channels_last: an empty tensor is contiguous in
    both formats, and like PyTorch the results take the contiguous one; the
    weight and bias gradients are zeros."""
    x = torch.randn(0, 8, 5, 6).to(memory_format=torch.channels_last)
    w = torch.randn(16, 1, 3, 3)
    y = customops.depthwise_conv2d(x, w, None, 1, 1)
    ref = F.conv2d(x, w, None, 1, 1, 1, 8)
    assert y.shape == ref.shape == (0, 16, 5, 6) and y.stride() == ref.stride()
    g = torch.randn(0, 16, 5, 6).to(memory_format=torch.channels_last)
    gx, gw, gb = torch.ops.customops.depthwise_conv2d_backward(g, x, w, [1, 1], [1, 1], [1, 1], [True, True, True])
    assert gx.shape == x.shape
    assert torch.equal(gw, torch.zeros_like(w)) and torch.equal(gb, torch.zeros(16))


def test_depthwise_cpu_channels_last_large_output():
    """Outputs and input gradients of at least 8 MiB are written with streaming
    stores, a block of pixels at a time; against ATen in float64."""
    x = torch.randn(1, 256, 96, 97).to(memory_format=torch.channels_last)
    w = torch.randn(256, 1, 3, 3)
    b = torch.randn(256)
    assert x.numel() * 4 >= 8 * 2**20
    y = customops.depthwise_conv2d(x, w, b, 1, 1)
    ref = F.conv2d(x.double(), w.double(), b.double(), 1, 1, 1, 256)
    assert y.is_contiguous(memory_format=torch.channels_last)
    _assert_close_scaled(y, ref, 2e-5)
    g = torch.randn(ref.shape).to(memory_format=torch.channels_last)
    gx = torch.ops.customops.depthwise_conv2d_backward(g, x, w, [1, 1], [1, 1], [1, 1], [True, False, False])[0]
    want = torch.ops.aten.convolution_backward(g.double(), x.double(), w.double(), None, [1, 1], [1, 1], [1, 1], False,
                                               [0, 0], 256, [True, False, False])[0]
    assert gx.is_contiguous(memory_format=torch.channels_last)
    _assert_close_scaled(gx, want, 2e-5)


def test_depthwise_cpu_channels_last_large_strided_output():
    """A stride-2 forward whose output is at least 8 MiB streams its row blocks
    too; against ATen in float64."""
    x = torch.randn(1, 256, 192, 194).to(memory_format=torch.channels_last)
    w = torch.randn(256, 1, 3, 3)
    y = customops.depthwise_conv2d(x, w, None, 2, 1)
    ref = F.conv2d(x.double(), w.double(), None, 2, 1, 1, 256)
    assert y.numel() * 4 >= 8 * 2**20
    assert y.is_contiguous(memory_format=torch.channels_last)
    _assert_close_scaled(y, ref, 2e-5)
