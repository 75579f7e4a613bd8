"""depthwise_conv2d on CUDA for channels_last inputs: the NHWC kernels
(kernels/cuda/depthwise_conv2d/nhwc*.cu) against F.conv2d in float64 on the CPU,
their output layout, and run-to-run determinism. 3x3 windows at row stride 1
or 2 run the column kernels by default (the forward and unit-stride input
gradient, half types from 64 channels; the weight gradient), half types'
larger windows up to 9x9 at unit stride the tensor-core kernel (forward and
input gradient), and everything the row-streaming and tiled kernels under
CUSTOMOPS_DEPTHWISE_ALGO=rows; both are checked."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import customops
from conftest import cuda_kernel_names, requires_cuda

# Tests of customops' own kernels: the rule of customops.backends must not hand their shapes to PyTorch.
pytestmark = [requires_cuda, pytest.mark.usefixtures("customops_kernels"), pytest.mark.torch_independent]

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
# Error over the reference's largest magnitude: accumulation in float (double),
# one rounding of each result to the dtype.
TOL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}

# (N, C, H, W, m, (kh, kw), stride, padding, dilation). The kernels give a
# thread 4 lanes (2 doubles) and a strip of 7 outputs of a row; a block a share
# of the channels (the correlations: all of a pixel's, up to 512 bytes; the
# weight gradient: 32 bytes). Channel counts that end inside a share or a
# thread's lanes, rows that end inside a strip, tiles past the plane's end.
CASES = [
    (2, 8, 13, 17, 1, (1, 1), 1, 0, 1),  # 1x1 taps
    (2, 96, 20, 23, 1, (3, 3), 1, 1, 1),  # ConvNeXt's channels, k3
    (2, 144, 15, 16, 1, (3, 3), 2, 1, 1),  # MobileNet's stride-2 block: strided staging, direct input gradient
    (1, 13, 19, 21, 1, (5, 5), 1, 2, 1),  # C = 13: lane-by-lane staging and stores
    (2, 3, 17, 30, 2, (7, 7), 1, 3, 1),  # C = 3, m = 2: the multiplier's gather
    (1, 8, 40, 37, 1, (31, 31), 1, 15, 1),  # the generic tap blocks (31 = 7 blocks of 4 + 3)
    (2, 13, 11, 9, 3, (3, 5), (2, 1), (0, 2), (2, 1)),  # m = 3, rectangular, stride and dilation
    (1, 24, 25, 27, 1, (3, 3), 1, 2, 2),  # dilation at unit stride: the strided-tap kernels
    (1, 16, 6, 5, 1, (3, 3), 1, 4, 1),  # padding wider than the kernel (negative in the input gradient)
    (3, 24, 1, 1, 1, (3, 3), 1, 1, 1),  # 1x1 images
    (2, 20, 9, 70, 1, (9, 9), 1, 4, 1),  # 9 taps: a partial block of 4; rows of two tiles
    (2, 6, 33, 29, 1, (2, 4), 1, (1, 2), 1),  # even kernel sizes
    (2, 32, 16, 16, 1, (2, 2), 2, 0, 1),  # patchify-like: stride equal to the kernel
    (1, 8, 205, 203, 1, (3, 3), 1, 0, (100, 99)),  # a window no tile holds: the direct kernels
    (1, 260, 9, 12, 1, (3, 3), 1, 1, 1),  # several channel shares, the last one partial
    (4, 144, 56, 56, 1, (3, 3), 1, 1, 1),  # MobileNet
    (4, 96, 56, 56, 1, (7, 7), 1, 3, 1),  # ConvNeXt
    # The 3x3 column correlations: a thread's lanes of a column, walks of a share of all images' rows (at
    # least 8; these small planes: walks that cross images and start or end inside one).
    (3, 36, 11, 9, 1, (3, 3), 1, 1, 1),  # 33 rows in 4 walks of 9, three of them crossing an image's edge
    (2, 64, 13, 11, 1, (3, 3), 2, 1, 1),  # stride 2, odd sizes: 14 output rows, one walk over both images
    (1, 12, 16, 9, 1, (3, 3), (1, 2), (0, 1), 1),  # strides and padding differing by dimension
    (2, 8, 30, 3, 1, (3, 3), 1, 0, 1),  # no padding, a column narrower than the window plus one
    (5, 64, 5, 7, 1, (3, 3), 1, 1, 1),  # 25 rows in walks of 9: the second ends one image, covers one, starts one
    # The 3x3 column weight gradient (every dtype): a thread's lanes of a column, a block's channel groups.
    (1, 16, 70, 9, 1, (3, 3), 1, 1, 1),  # one image: columns split into runs (half types: walks) of rows, halos re-read
    (1, 1032, 5, 6, 1, (3, 3), 1, 1, 1),  # more than 256 groups of lanes: two or three channel shares
    (2, 24, 12, 13, 1, (3, 3), (1, 3), (2, 0), 1),  # stride along the rows only, padding past the window
    (1, 16, 9, 30, 1, (3, 3), 2, 0, 1),  # stride 2, no padding: the run's last step holds only a lower tap row
    (2, 16, 14, 13, 1, (3, 3), 3, 1, 1),  # stride 3: the tiled weight gradient
    (2, 40, 15, 14, 1, (5, 5), 2, 2, 1),  # 5x5 at stride 2 (EfficientNet's downsampling): the tap-major weight table
    # The tensor-core correlations (half types, windows larger than 3x3 up to 9x9, unit stride; blocks of 16
    # channels and runs of 16-128 output rows counted over the batch, tiles of 8-64 columns).
    (3, 24, 5, 7, 1, (5, 5), 1, 2, 1),  # one run over three images; a second chunk of 8 channels
    (1, 16, 20, 70, 1, (7, 7), 1, 3, 1),  # two column tiles, the second 6 wide
    (2, 32, 11, 19, 1, (3, 7), 1, (1, 3), 1),  # rectangular window
    (2, 16, 9, 40, 1, (9, 9), 1, 4, 1),  # the widest window (8 outputs + 8 more inputs fill K = 16)
    (9, 16, 3, 5, 1, (3, 5), 1, 1, 1),  # nine images in one run of rows
    (2, 24, 37, 12, 1, (5, 3), 1, (2, 0), 1),  # runs that end inside images, padding past a side of the window
    (2, 24, 12, 12, 1, (7, 7), 1, 0, 1),  # no padding (the input gradient's is 6)
]
ALGOS = ["default", "rows"]


def _ids(case):
    n, c, h, w, m, k, s, p, d = case
    return f"{n}x{c}x{h}x{w}_m{m}_k{k[0]}x{k[1]}_s{s}_p{p}_d{d}".replace(" ", "")


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str):
    assert got.dtype == dtype, what
    scale = max(want.abs().max().item(), 1e-30)
    err = (got.double().cpu() - want).abs().max().item() / scale
    assert err <= TOL[dtype], f"{what}: error {err:.3g} over scale {scale:.3g} (tolerance {TOL[dtype]})"


def _inputs(case, dtype, requires_grad=True):
    n, c, h, w, m, (kh, kw), stride, padding, dilation = case
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    weight = torch.randn(c * m, 1, kh, kw, device="cuda", dtype=dtype) / (kh * kw) ** 0.5
    bias = torch.randn(c * m, device="cuda", dtype=dtype)
    for t in (x, weight, bias):
        t.requires_grad_(requires_grad)
    return x, weight, bias, (stride, padding, dilation)


def _reference(x, weight, bias, window):
    """F.conv2d and its gradients in float64 on the CPU, from the same values."""
    xr, wr, br = (t.detach().double().cpu().requires_grad_() for t in (x, weight, bias))
    y = F.conv2d(xr, wr, br, *window, groups=x.shape[1])
    return xr, wr, br, y


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_forward_and_gradients_against_float64(case, dtype, algo, monkeypatch):
    if algo != "default":
        monkeypatch.setenv("CUSTOMOPS_DEPTHWISE_ALGO", algo)
    x, weight, bias, window = _inputs(case, dtype)
    y = customops.depthwise_conv2d(x, weight, bias, *window)
    xr, wr, br, ref = _reference(x, weight, bias, window)
    assert y.shape == ref.shape
    assert y.is_contiguous(memory_format=torch.channels_last)
    _close(y, ref.detach(), dtype, "output")

    g = torch.randn_like(y)  # channels_last, as y
    grads = torch.autograd.grad(y, (x, weight, bias), g)
    want = torch.autograd.grad(ref, (xr, wr, br), g.double().cpu())
    assert grads[0].is_contiguous(memory_format=torch.channels_last)
    assert grads[1].shape == weight.shape and grads[1].is_contiguous()
    for got, ref_grad, what in zip(grads, want, ("grad_input", "grad_weight", "grad_bias")):
        _close(got, ref_grad, dtype, what)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("c,k,s", [(144, 3, 1), (144, 3, 2), (96, 7, 1)])
def test_benchmark_shapes(c, k, s, dtype, algo, monkeypatch):
    """The benchmark's shapes at batch 64 (the row kernels stream a band of
    rows through a ring; the column kernels' walks each cover about two
    images, starting and ending inside them); against float64 on the GPU."""
    if algo != "default":
        monkeypatch.setenv("CUSTOMOPS_DEPTHWISE_ALGO", algo)
    x = torch.randn(64, c, 56, 56, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    w = torch.randn(c, 1, k, k, device="cuda", dtype=dtype) / k
    args = ([s, s], [k // 2] * 2, [1, 1])
    y = customops.depthwise_conv2d(x, w, None, s, k // 2)
    g = torch.randn_like(y)
    grads = torch.ops.customops.depthwise_conv2d_backward(g, x, w, *args, [True, True, False])
    ref = F.conv2d(x.double(), w.double(), None, s, k // 2, 1, c)
    want = torch.ops.aten.convolution_backward(g.double(), x.double(), w.double(), None, *args, False, [0, 0], c,
                                               [True, True, False])
    for got, exp, what in zip((y,) + grads[:2], (ref,) + want[:2], ("output", "grad_input", "grad_weight")):
        _close(got, exp.cpu(), dtype, what)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_empty_batch(dtype):
    x, weight, bias, window = _inputs((0, 16, 8, 8, 2, (3, 3), 1, 1, 1), dtype)
    y = customops.depthwise_conv2d(x, weight, bias, *window)
    assert y.shape == (0, 32, 8, 8)
    gx, gw, gb = torch.ops.customops.depthwise_conv2d_backward(y, x, weight, [1, 1], [1, 1], [1, 1],
                                                                [True, True, True])
    assert gx.shape == x.shape
    assert torch.equal(gw, torch.zeros_like(weight)) and torch.equal(gb, torch.zeros_like(bias))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("case", [CASES[4], CASES[6], CASES[13], CASES[14], CASES[15], CASES[16]], ids=_ids)
def test_reruns_are_bit_identical(case, dtype):
    """Every gradient is a fixed-order sum (no atomics): three reruns give the same bits."""
    x, weight, bias, (s, p, d) = _inputs(case, dtype, requires_grad=False)
    pair = lambda v: [v, v] if isinstance(v, int) else list(v)  # noqa: E731
    y = customops.depthwise_conv2d(x, weight, bias, s, p, d)
    g = torch.randn_like(y)
    args = (g, x, weight, pair(s), pair(p), pair(d), [True, True, True])
    first = torch.ops.customops.depthwise_conv2d_backward(*args)
    for _ in range(3):
        assert torch.equal(customops.depthwise_conv2d(x, weight, bias, s, p, d), y)
        for a, b in zip(first, torch.ops.customops.depthwise_conv2d_backward(*args)):
            assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_permuted_nhwc_tensor(dtype):
    """An NHWC tensor permuted to (N, C, H, W), as ConvNeXt's blocks hand on,
    is channels_last: output and input gradient channels_last, equal to the
    reference and (to rounding) to the NCHW kernels' results."""
    nhwc = torch.randn(2, 19, 23, 48, device="cuda", dtype=dtype)
    x = nhwc.permute(0, 3, 1, 2).requires_grad_()
    weight = (torch.randn(48, 1, 7, 7, device="cuda", dtype=dtype) / 7).requires_grad_()
    y = customops.depthwise_conv2d(x, weight, None, 1, 3)
    assert y.is_contiguous(memory_format=torch.channels_last)
    g = torch.randn_like(y)
    gx, gw = torch.autograd.grad(y, (x, weight), g)
    assert gx.is_contiguous(memory_format=torch.channels_last)
    xr, wr = x.detach().double().cpu().requires_grad_(), weight.detach().double().cpu().requires_grad_()
    ref = F.conv2d(xr, wr, None, 1, 3, 1, 48)
    want = torch.autograd.grad(ref, (xr, wr), g.double().cpu())
    for got, exp, what in zip((y, gx, gw), (ref.detach(),) + want, ("output", "grad_input", "grad_weight")):
        _close(got, exp, dtype, what)
    nchw = x.detach().contiguous()
    y2 = customops.depthwise_conv2d(nchw, weight.detach(), None, 1, 3)
    assert y2.is_contiguous()
    _close(y, y2.double().cpu(), dtype, "NHWC against NCHW kernels")


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("offset", [1, 2, 3])
def test_unaligned_input(offset, dtype):
    """Inputs that start off a 16-byte boundary stage narrower words (and
    leave float's column kernels to the row kernels)."""
    n, c, h, w = 2, 16, 14, 15
    flat = torch.randn(offset + n * h * w * c, device="cuda", dtype=dtype)
    x = flat[offset:].view(n, h, w, c).permute(0, 3, 1, 2)
    weight = torch.randn(c, 1, 3, 3, device="cuda", dtype=dtype)
    y = customops.depthwise_conv2d(x, weight, None, 1, 1)
    _close(y, F.conv2d(x.double().cpu(), weight.double().cpu(), None, 1, 1, 1, c), dtype, "output")
    g = torch.randn_like(y)
    gx, gw, _ = torch.ops.customops.depthwise_conv2d_backward(g, x, weight, [1, 1], [1, 1], [1, 1],
                                                              [True, True, False])
    want = torch.ops.aten.convolution_backward(g.double().cpu(), x.double().cpu(), weight.double().cpu(), None,
                                               [1, 1], [1, 1], [1, 1], False, [0, 0], c, [True, True, False])
    _close(gx, want[0], dtype, "grad_input")
    _close(gw, want[1], dtype, "grad_weight")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_nonfinite_input_reaches_only_its_window(dtype):
    """The tensor-core kernel multiplies each input by Toeplitz zeros outside
    its window too (0 * inf is NaN): a tile holding an inf is computed over
    the window's taps only, so outputs outside the inf's window stay finite,
    as in the definition."""
    n, c, h, w = 2, 32, 20, 40
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    x[1, 5, 10, 20] = float("inf")
    x[0, 17, 3, 33] = float("nan")
    weight = torch.rand(c, 1, 7, 7, device="cuda", dtype=dtype) + 0.5  # positive: inf * tap stays inf
    y = customops.depthwise_conv2d(x, weight, None, 1, 3)
    ref = F.conv2d(x.double().cpu(), weight.double().cpu(), None, 1, 3, 1, c)
    assert torch.equal(torch.isfinite(y.cpu()), torch.isfinite(ref))
    assert torch.equal(torch.isnan(y.cpu()), torch.isnan(ref))
    keep = torch.isfinite(ref)
    _close(torch.where(keep, y.double().cpu(), 0).to(dtype), torch.where(keep, ref, 0), dtype, "finite outputs")


def test_weight_gradient_ignores_pixels_its_tap_never_reads():
    """Outputs past a tile's live columns read real pixels: an inf in the last
    column belongs to tap 2's gradient only, and taps 0 and 1 stay finite."""
    x = torch.zeros(1, 16, 1, 9, device="cuda", dtype=torch.float64).to(memory_format=torch.channels_last)
    x[..., 8] = float("inf")
    w = torch.ones(16, 1, 1, 3, device="cuda", dtype=torch.float64)
    g = torch.ones(1, 16, 1, 7, device="cuda", dtype=torch.float64).to(memory_format=torch.channels_last)
    ours = torch.ops.customops.depthwise_conv2d_backward(g, x, w, [1, 1], [0, 0], [1, 1], [False, True, False])[1]
    assert torch.isfinite(ours[..., :2]).all()
    assert torch.isinf(ours[..., 2]).all()


def test_no_layout_conversion():
    """Forward and backward of a channels_last input copy no input- or
    output-sized tensor (no hidden NCHW round trip)."""
    x, weight, bias, window = _inputs((2, 32, 20, 20, 1, (7, 7), 1, 3, 1), torch.float16)
    g = torch.randn(2, 32, 20, 20, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        y = customops.depthwise_conv2d(x, weight, bias, *window)
        torch.autograd.grad(y, (x, weight, bias), g)
    big = [list(x.shape)]
    copies = [e for e in prof.events()
              if e.name in ("aten::copy_", "aten::clone", "aten::contiguous", "aten::_to_copy")
              and any(list(shape) in big for shape in e.input_shapes)]
    assert not copies, [(e.name, e.input_shapes) for e in copies]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_column_kernels_run_where_supported(dtype, monkeypatch):
    """The 3x3 forward and unit-stride input gradient run the column kernels
    (half types from 64 channels), and so does the 3x3 weight gradient at row
    stride 1 or 2; half types' correlations under 64 channels, a weight
    gradient at stride 3, CUSTOMOPS_DEPTHWISE_ALGO=rows, a 5x5 window,
    dilation or a channel count the lanes do not divide run the row-streaming
    and tiled kernels instead. Half types' larger windows up to 9x9 at unit
    stride run the tensor-core kernel, but under CUSTOMOPS_DEPTHWISE_ALGO=fma."""

    def names(case):
        x, weight, _, (s, p, d) = _inputs(case, dtype, requires_grad=False)
        pair = lambda v: [v, v] if isinstance(v, int) else list(v)  # noqa: E731
        y = customops.depthwise_conv2d(x, weight, None, s, p, d)
        return cuda_kernel_names(lambda: (customops.depthwise_conv2d(x, weight, None, s, p, d),
                                          torch.ops.customops.depthwise_conv2d_backward(
                                              y, x, weight, pair(s), pair(p), pair(d), [True, True, False])))

    def columns(case, kind="column_corr"):
        return [n for n in names(case) if kind in n]

    lanes = 16 // torch.empty((), dtype=dtype).element_size()  # 16 bytes: 8 halves are two threads' lanes
    unit, strided = (2, 8 * lanes, 9, 11, 1, (3, 3), 1, 1, 1), (2, 8 * lanes, 9, 11, 1, (3, 3), 2, 1, 1)
    assert len(columns(unit, "column_weight_grad")) == 1
    assert len(columns(strided, "column_weight_grad")) == 1
    assert not columns((2, 8 * lanes, 9, 11, 1, (3, 3), 3, 1, 1), "column_weight_grad")
    assert len(columns(unit)) == 2  # forward and input gradient
    assert len(columns(strided)) == 1  # the strided input gradient gathers
    narrow = (2, 4 * lanes, 9, 11, 1, (3, 3), 1, 1, 1)  # 64 bytes a pixel
    assert len(columns(narrow)) == (0 if dtype in (torch.float16, torch.bfloat16) else 2)
    for case in [(2, 8 * lanes, 9, 11, 1, (5, 5), 1, 2, 1), (2, 8 * lanes, 9, 11, 1, (3, 3), 1, 2, 2),
                 (2, 8 * lanes + 1, 9, 11, 1, (3, 3), 1, 1, 1)]:
        assert not columns(case, "column_"), case
    # Windows larger than 3x3 up to 9x9 at unit stride: half types on tensor cores (channels a multiple of 8).
    half = dtype in (torch.float16, torch.bfloat16)
    k7 = (2, 8 * lanes, 9, 11, 1, (7, 7), 1, 3, 1)
    assert len(columns(k7, "mma_corr")) == (2 if half else 0)
    assert len(columns((2, 8 * lanes, 9, 11, 1, (3, 5), 1, 1, 1), "mma_corr")) == (2 if half else 0)
    for case in [(2, 8 * lanes, 9, 11, 1, (7, 7), 2, 3, 1), (2, 8 * lanes, 9, 11, 1, (7, 7), 1, 6, 2),
                 (2, 12, 9, 11, 1, (7, 7), 1, 3, 1), (2, 8 * lanes, 19, 11, 1, (11, 11), 1, 5, 1)]:
        assert not columns(case, "mma_corr"), case
    monkeypatch.setenv("CUSTOMOPS_DEPTHWISE_ALGO", "fma")
    assert not columns(k7, "mma_corr") and len(columns(unit)) == 2
    monkeypatch.setenv("CUSTOMOPS_DEPTHWISE_ALGO", "rows")
    got = names(unit)
    assert not [n for n in got if "column_" in n] and [n for n in got if "row_corr" in n], got
    assert [n for n in got if "weight_grad_tile" in n], got
