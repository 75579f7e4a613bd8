"""upsample_bilinear2d and trilinear_interpolation beyond the generic table:
TensorFlow's conventions against an independent NumPy implementation of TF's
kernel, the deterministic backward, and the scale_factor path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import customops
from conftest import HAS_CUDA, requires_cuda
from op_db.trilinear import _trilinear_ref
from op_db.upsample import _resize_ref

pytestmark = pytest.mark.torch_dependent

DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]

# TensorFlow's switches for each coordinate_mode: (align_corners, half_pixel_centers).
TF_FLAGS = {"half_pixel": (False, True), "align_corners": (True, False), "asymmetric": (False, False)}


def tf_resize_bilinear(x: np.ndarray, out_h: int, out_w: int, align_corners: bool,
                       half_pixel_centers: bool) -> np.ndarray:
    """TensorFlow's resize_bilinear (tensorflow/core/kernels/image/resize_bilinear_op.cc),
    written out for NCHW: per-axis lower/upper indices and lerp, then
    top = tl + (tr - tl) * x_lerp and out = top + (bottom - top) * y_lerp."""

    def weights(in_size: int, out_size: int):
        scale = (in_size - 1) / (out_size - 1) if align_corners and out_size > 1 else in_size / out_size
        out = []
        for o in range(out_size):
            src = (o + 0.5) * scale - 0.5 if half_pixel_centers else o * scale
            lower = max(int(np.floor(src)), 0)
            upper = min(int(np.ceil(src)), in_size - 1)
            out.append((lower, upper, src - np.floor(src)))
        return out

    ys, xs = weights(x.shape[2], out_h), weights(x.shape[3], out_w)
    result = np.empty(x.shape[:2] + (out_h, out_w), dtype=x.dtype)
    for i, (y0, y1, ly) in enumerate(ys):
        for j, (x0, x1, lx) in enumerate(xs):
            top = x[:, :, y0, x0] + (x[:, :, y0, x1] - x[:, :, y0, x0]) * lx
            bottom = x[:, :, y1, x0] + (x[:, :, y1, x1] - x[:, :, y1, x0]) * lx
            result[:, :, i, j] = top + (bottom - top) * ly
    return result


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", list(TF_FLAGS))
@pytest.mark.parametrize("in_size,out_size", [((5, 7), (10, 14)), ((6, 9), (4, 5)), ((3, 4), (11, 7)),
                                              ((1, 5), (3, 2)), ((7, 6), (1, 1)), ((4, 4), (4, 4))])
def test_matches_tensorflow_formula(device, mode, in_size, out_size):
    x = torch.randn(2, 3, *in_size, dtype=torch.float64)
    expected = tf_resize_bilinear(x.numpy(), *out_size, *TF_FLAGS[mode])
    actual = customops.upsample_bilinear2d(x.to(device), out_size, mode).cpu().numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["x2", "large_factor", "down", "channels_last"])
def test_backward_is_deterministic(device, case):
    """Bit-identical gradients run to run, with deterministic algorithms enforced
    (PyTorch's CUDA upsample backward uses atomics and refuses to run there)."""
    shapes = {"x2": ((4, 16, 67, 45), (134, 90)), "large_factor": ((2, 8, 7, 5), (61, 47)),
              "down": ((2, 8, 64, 48), (23, 17)), "channels_last": ((2, 32, 33, 21), (66, 42))}
    shape, size = shapes[case]
    x = torch.randn(shape, device=device)
    if case == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    x.requires_grad_()
    grad = torch.randn(shape[0], shape[1], *size, device=device)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        runs = [torch.autograd.grad(customops.upsample_bilinear2d(x, size), x, grad)[0] for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(previous)
    for r in runs[1:]:
        assert torch.equal(r, runs[0])
    expected = torch.autograd.grad(torch.nn.functional.interpolate(x.double(), size=size, mode="bilinear"), x,
                                   grad.double())[0]
    torch.testing.assert_close(runs[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [2.0, 0.5, (1.5, 3.0)])
def test_scale_factor(device, scale):
    x = torch.randn(2, 3, 8, 6, device=device)
    for mode, align in (("half_pixel", False), ("align_corners", True)):
        actual = customops.upsample_bilinear2d(x, scale_factor=scale, coordinate_mode=mode)
        expected = torch.nn.functional.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=align,
                                                   recompute_scale_factor=True)
        torch.testing.assert_close(actual, expected)
    module = customops.UpsampleBilinear2d(scale_factor=scale, coordinate_mode="asymmetric")
    torch.testing.assert_close(torch.jit.script(module)(x), module(x))


def test_scale_factor_compiles_once_for_every_size():
    """Output sizes computed from symbolic input sizes: one graph, no recompile.
    (Counted with dynamo's eager backend: inductor compiles a graph whose sizes
    come from float arithmetic twice on its first call, whatever the op.)"""
    counter = CompileCounterWithBackend("eager")
    torch._dynamo.reset()
    fn = torch.compile(lambda x: customops.upsample_bilinear2d(x, scale_factor=2.0), fullgraph=True,
                       dynamic=True, backend=counter)
    for shape in ((2, 3, 8, 10), (4, 3, 11, 9), (5, 3, 16, 12)):
        x = torch.randn(shape)
        torch.testing.assert_close(fn(x), customops.upsample_bilinear2d(x, scale_factor=2.0))
    assert counter.frame_count == 1


def test_size_arguments_are_checked():
    x = torch.randn(1, 1, 4, 4)
    with pytest.raises(ValueError, match="not both"):
        customops.upsample_bilinear2d(x, 8, scale_factor=2.0)
    with pytest.raises(ValueError, match="exactly one"):
        customops.UpsampleBilinear2d()
    with pytest.raises(ValueError, match="exactly one"):
        customops.UpsampleBilinear2d(size=4, scale_factor=2.0)


@requires_cuda
@pytest.mark.usefixtures("customops_kernels")
@pytest.mark.parametrize("mode", list(TF_FLAGS))
@pytest.mark.parametrize("shape,size", [((512, 4, 67, 45), (134, 90)), ((256, 8, 64, 48), (23, 17)),
                                        ((2048, 1, 37, 29), (81, 70))])
def test_cuda_runs_of_rows(mode, shape, size):
    """Tensors large enough that each CUDA thread walks a run of several rows
    (small ones get one row per thread), with heights that end in a partial
    run: forward and backward against the float64 reference on the GPU."""
    x = torch.randn(shape, device="cuda", dtype=torch.float64, requires_grad=True)
    out = customops.upsample_bilinear2d(x, size, mode)
    grad = torch.randn_like(out)
    (gx,) = torch.autograd.grad(out, x, grad)
    x_ref = x.detach().requires_grad_()
    ref = _resize_ref(x_ref, size, mode)
    (gx_ref,) = torch.autograd.grad(ref, x_ref, grad)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gx, gx_ref, rtol=1e-10, atol=1e-10)


@requires_cuda
@pytest.mark.usefixtures("customops_kernels")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("mode", list(TF_FLAGS))
@pytest.mark.parametrize("shape,size,misaligned", [
    ((3, 5, 70, 97), (140, 194), False),
    ((2, 3, 33, 40), (132, 160), False),
    ((2, 3, 50, 41), (167, 137), True),
    ((2, 3, 90, 77), (31, 25), False),
    ((1, 2, 30, 16), (600, 32), False),
    ((1, 2, 9, 500), (18, 1000), False),
])
def test_cuda_backward_ratios(dtype, mode, shape, size, misaligned):
    """The CUDA backward in every dtype against the float64 reference, at ratios
    that change how its threads find readers: 2x, 4x (edge indices with more
    readers than the unrolled count), a non-integer ratio with a gradient that
    is not 16-byte aligned, and downsampling (inputs with no readers). Planes
    span several tiles of rows at 2x and at the non-integer ratio (and at 4x in
    float64); 20x taller outputs outrun a tile's table of row taps; 1000-wide
    rows are too wide for a tile and take the kernel that walks runs of rows."""
    grad64 = torch.randn(shape[:2] + size, device="cuda", dtype=torch.float64)
    grad = grad64.to(dtype)
    if misaligned:
        grad = torch.empty(grad.numel() + 1, device="cuda", dtype=dtype)[1:].view_as(grad).copy_(grad)
        assert grad.is_contiguous() and grad.data_ptr() % 16 != 0
    actual = torch.ops.customops.upsample_bilinear2d_backward(grad, shape[2:], mode)
    x = torch.zeros(shape, device="cuda", dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(_resize_ref(x, size, mode), x, grad.double())
    tol = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    if dtype == torch.float32:  # source coordinates in float lose a part in 2^24 of the largest index
        tol *= max(1, max(*shape[2:], *size) / 64)
    torch.testing.assert_close(actual.double(), expected, rtol=tol, atol=tol * expected.abs().max().item())


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n,f", [(1000, 32), (300, 256), (513, 5)])
def test_trilinear_large_batches_on_cuda(dtype, n, f):
    """Many points per block and per warp (lane groups of 1 to 32): gradients of
    feats and points against float64 autograd of the formula."""
    feats = torch.randn(n, 8, f, device="cuda", dtype=dtype, requires_grad=True)
    points = (torch.rand(n, 3, device="cuda", dtype=dtype) * 2 - 1).requires_grad_()
    out = customops.trilinear_interpolation(feats, points)
    grad = torch.randn_like(out)
    gf, gp = torch.autograd.grad(out, (feats, points), grad)
    f64, p64 = feats.detach().double().requires_grad_(), points.detach().double().requires_grad_()
    ref = _trilinear_ref(f64, p64)
    rgf, rgp = torch.autograd.grad(ref, (f64, p64), grad.double())
    tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol)
    torch.testing.assert_close(gf.double(), rgf, rtol=tol, atol=tol)
    torch.testing.assert_close(gp.double(), rgp, rtol=tol, atol=tol * f ** 0.5)
