"""conv2d's direct grouped kernels (CUDA cores, and tensor cores for half types in groups of multiples of 8, and for
float32 as TF32 in the forward and input gradient; groups of at most 32 channels, multiples of 4) against the
explicit path (im2col + cuBLAS per group) and against F.conv2d in float64: strides, padding beyond the kernel,
dilation, asymmetric kernels, 1x1 and 7x7 filters, groups of 4 to 32 channels, more output-channel lanes than one
block holds, NCHW / channels_last / non-contiguous inputs and weights, every dtype, gradients; which kernels ran,
and where the explicit path takes over (unaligned or wide groups, float64, batch 0)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import customops
from conftest import cuda_kernel_names, requires_cuda
from test_conv2d_implicit import _check, _check_results, _reference, _run

pytestmark = [requires_cuda, pytest.mark.torch_independent]

# (N, C, H, W, K, (kh, kw), stride, padding, dilation, groups, name)
CASES = [
    (2, 32, 10, 10, 32, (3, 3), 1, 1, 1, 4, "groups_of_8"),
    (2, 64, 9, 11, 64, (3, 3), 2, 1, 1, 16, "groups_of_4_stride2"),
    (3, 48, 12, 13, 96, (3, 5), (2, 1), (1, 2), (1, 2), 3, "16_to_32_asymmetric_strided_dilated"),
    (2, 64, 8, 8, 128, (1, 1), 1, 0, 1, 4, "pointwise"),
    (2, 16, 15, 14, 16, (7, 7), 2, 3, 1, 2, "7x7_stride2"),
    (1, 256, 6, 7, 256, (3, 3), 1, 1, 1, 32, "resnext_32_groups"),
    (2, 24, 10, 10, 24, (3, 3), 1, 1, 1, 2, "groups_of_12"),
    (2, 8, 10, 9, 16, (3, 3), 1, 4, 1, 2, "padding_gt_kernel"),
    (2, 96, 6, 6, 96, (3, 3), 1, 1, 1, 12, "partial_lane_block"),
    (2, 1024, 4, 5, 1024, (3, 3), 1, 1, 1, 128, "two_lane_blocks"),
    (1, 32, 1, 1, 32, (1, 1), 1, 0, 1, 8, "1x1_image"),
    (2, 32, 9, 9, 32, (3, 3), 3, 0, 1, 4, "stride_3_unpadded"),
    (2, 16, 9, 9, 48, (3, 3), 1, 1, 1, 2, "8_to_24"),
    (2, 32, 11, 12, 32, (3, 3), 1, 1, 2, 4, "dilated_unit_stride"),
    # The explicit path: batch 0, groups of 2 channels, groups of 64.
    (0, 32, 6, 6, 32, (3, 3), 1, 1, 1, 4, "batch0"),
    (2, 12, 8, 8, 12, (3, 3), 1, 1, 1, 6, "groups_of_2"),
    (2, 128, 6, 6, 128, (3, 3), 1, 1, 1, 2, "groups_of_64"),
]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# The CUDA-core kernels and the tensor-core one (half types, groups of multiples of 8 channels).
DIRECT = ("direct_conv", "mma_conv", "weight_grad_direct", "mma_weight_grad")


def _inputs(case, dtype, layout):
    n, c, h, w, k, ks, stride, padding, dilation, groups, _ = case
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype)
    weight = torch.randn(k, c // groups, *ks, device="cuda", dtype=dtype) / (c // groups * ks[0] * ks[1]) ** 0.5
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
        weight = weight.to(memory_format=torch.channels_last)
    elif layout == "noncontiguous":
        x = torch.randn(n, c, h, 2 * w, device="cuda", dtype=dtype)[..., ::2]
        weight = weight.transpose(2, 3).contiguous().transpose(2, 3)  # the filter's taps column-major
    bias = torch.randn(k, device="cuda", dtype=dtype)
    return x, weight, bias, (stride, padding, dilation, groups)


def _direct_supported(case, dtype):
    n, c, _, _, k, _, _, _, _, groups, _ = case
    cg, kg = c // groups, k // groups
    return dtype != torch.float64 and n > 0 and cg % 4 == 0 and kg % 4 == 0 and max(cg, kg) <= 32


@pytest.mark.parametrize("layout", ["channels_last", "contiguous", "noncontiguous"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
def test_direct_explicit_and_reference_agree(case, dtype, layout, monkeypatch):
    _check_default_and_explicit(case, dtype, layout, monkeypatch)


def _tf32_tensor_cores(case):
    """The passes the tensor-core kernel takes in float32 as TF32: the forward where the groups' input channels are
    8, 16 or 32 (a power of two of 16-byte chunks a pixel) and their output channels a multiple of 8 (at most 32),
    and the input gradient, the forward of grad_out with the flipped filter (the same rule, sides swapped), at unit
    stride with padding within the dilated kernel. The weight gradient stays on the CUDA cores."""
    n, c, _, _, k, ks, stride, padding, dilation, groups, _ = case
    cg, kg = c // groups, k // groups
    (sh, sw), (ph, pw), (dh, dw) = ((v, v) if isinstance(v, int) else v for v in (stride, padding, dilation))
    direct = _direct_supported(case, torch.float32)
    forward = direct and cg in (8, 16, 32) and kg % 8 == 0 and kg <= 32
    input_grad = direct and kg in (8, 16, 32) and cg % 8 == 0 and cg <= 32 and (sh, sw) == (1, 1) and \
        dh * (ks[0] - 1) >= ph and dw * (ks[1] - 1) >= pw
    return forward, input_grad


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
def test_tf32_tensor_core_kernels_run_where_supported(case, tf32):
    """float32 with TF32 allowed: the forward and the input gradient run the tensor-core kernel (mma_conv) on the
    calls _tf32_tensor_cores names, NCHW ones through the transposes; the rest the CUDA-core kernels."""
    forward, input_grad = _tf32_tensor_cores(case)
    for layout in ("channels_last", "contiguous"):
        x, weight, bias, window = _inputs(case, torch.float32, layout)
        if x.shape[0] == 0:
            return
        geometry = [[v] * 2 if isinstance(v, int) else list(v) for v in window[:3]]
        g = torch.ones_like(customops.conv2d(x, weight, bias, *window))
        fwd = cuda_kernel_names(lambda: customops.conv2d(x, weight, bias, *window))
        assert any("mma_conv" in n for n in fwd) == forward, (layout, fwd)
        dgrad = cuda_kernel_names(
            lambda: torch.ops.customops.conv2d_backward(g, x, weight, *geometry, window[3], [True, False, False]))
        assert any("mma_conv" in n for n in dgrad) == input_grad, (layout, dgrad)


@pytest.mark.parametrize("layout", ["channels_last", "contiguous", "noncontiguous"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
def test_tf32_explicit_and_reference_agree(case, layout, tf32, monkeypatch):
    """float32 with TF32 allowed: conv2d as it runs (the tensor-core kernel where it applies) and the explicit path
    agree with F.conv2d in float64 to TF32's 10 mantissa bits (as float16's)."""
    x, weight, bias, window = _inputs(case, torch.float32, layout)
    ref, g, ref_grads = _reference(x, weight, bias, window)
    results = {"default": _run(x, weight, bias, window, g)}
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "explicit")
    results["explicit"] = _run(x, weight, bias, window, g)
    _check_results(results, x, layout, ref, ref_grads, torch.float16)


def _check_default_and_explicit(case, dtype, layout, monkeypatch):
    """conv2d as it runs and under CUSTOMOPS_CONV2D_ALGO=explicit against F.conv2d in float64: outputs, gradients,
    their formats."""
    x, weight, bias, window = _inputs(case, dtype, layout)
    ref, g, ref_grads = _reference(x, weight, bias, window)

    results = {"default": _run(x, weight, bias, window, g)}
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "explicit")
    results["explicit"] = _run(x, weight, bias, window, g)

    _check_results(results, x, layout, ref, ref_grads, dtype)
    weight_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    for algo, (out, grads) in results.items():
        if out.numel():
            assert grads[1].is_contiguous(memory_format=weight_format), f"{algo} weight-gradient format"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=str)
def test_direct_kernels_run_where_supported(case, dtype, monkeypatch):
    """The forward, input gradient and weight gradient run the direct kernels (three launches, no im2col) on the
    calls they take, and the explicit path's im2col on the others and under CUSTOMOPS_CONV2D_ALGO=explicit."""
    x, weight, bias, window = _inputs(case, dtype, "channels_last")
    y = customops.conv2d(x, weight, bias, *window)
    g = torch.ones_like(y)
    geometry = [[v] * 2 if isinstance(v, int) else list(v) for v in window[:3]]  # stride, padding, dilation

    def step():
        customops.conv2d(x, weight, bias, *window)
        torch.ops.customops.conv2d_backward(g, x, weight, *geometry, window[3], [True, True, True])

    names = cuda_kernel_names(step)
    direct = sum(any(d in n for d in DIRECT) for n in names)
    if _direct_supported(case, dtype):
        assert direct == 3 and not any("im2col" in n for n in names), names
    else:
        assert direct == 0, names
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "explicit")
    names = cuda_kernel_names(step)
    assert not any(d in n for n in names for d in DIRECT), names


def test_unbatched_and_autocast_take_the_direct_path():
    """A (C, H, W) input and an autocast float16 call (float32 parameters) reach the direct kernels and match
    F.conv2d."""
    x = torch.randn(32, 9, 10, device="cuda")
    w = torch.randn(64, 8, 3, 3, device="cuda") / 8
    b = torch.randn(64, device="cuda")
    names = cuda_kernel_names(lambda: customops.conv2d(x, w, b, 1, 1, 1, 4))
    assert any(d in n for n in names for d in DIRECT), names
    _check(customops.conv2d(x, w, b, 1, 1, 1, 4), F.conv2d(x.double(), w.double(), b.double(), 1, 1, 1, 4),
           torch.float32, "unbatched")
    xb = x.unsqueeze(0).to(memory_format=torch.channels_last)
    with torch.autocast("cuda", dtype=torch.float16):
        y = customops.conv2d(xb, w, b, 1, 1, 1, 4)
        names = cuda_kernel_names(lambda: customops.conv2d(xb, w, b, 1, 1, 1, 4))
    assert y.dtype == torch.float16 and any(d in n for n in names for d in DIRECT), names
    _check(y, F.conv2d(xb.double(), w.double(), b.double(), 1, 1, 1, 4), torch.float16, "autocast")


def test_every_tensor_core_kernel_opts_in_to_its_shared_memory():
    """Forwards of two channel counts (two kernel instantiations, the second past the default 48 KB of shared
    memory) in one fresh process: each kernel needs its own opt-in (a shared one failed the second launch)."""
    code = """
import torch, torch.nn.functional as F, customops
for cg in (8, 16):
    x = torch.randn(2, 256, 20, 20, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    w = torch.randn(256, cg, 3, 3, device="cuda", dtype=torch.float16) / (3 * cg ** 0.5)
    want = F.conv2d(x.double(), w.double(), None, 1, 1, 1, 256 // cg)
    got = customops.conv2d(x, w, None, 1, 1, 1, 256 // cg)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=2e-2)
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
