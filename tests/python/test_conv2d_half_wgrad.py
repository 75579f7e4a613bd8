"""conv2d's float16/bfloat16 weight gradient kernel (kernels/cuda/conv2d/half_wgrad.cu) against float64 gradients:
stages of several short rows (an odd number of 8-pixel groups: the zero group), rows of up to 128 pixels whole and
pieces of longer ones, kernels of more than 9 taps (several tap groups), partial and several channel tiles (under
CUSTOMOPS_CONV2D_ALGO=direct, beyond the default rule), strides, dilation, padding beyond the kernel, batches split
over many chunks, NCHW and channels_last; and where it runs by default (the profiler's kernel names)."""

from __future__ import annotations

import pytest
import torch

from conftest import check_weight_grad, requires_cuda, weight_grad_kernel_names

pytestmark = [
    requires_cuda,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0),
                       reason="the kernel needs compute capability 8.0"),
    pytest.mark.torch_independent,
]

_KERNEL = "half_weight_grad"

# (N, C, H, W, K, (kh, kw), stride, padding, dilation, name)
CASES = [
    (2, 64, 56, 56, 64, (3, 3), 1, 1, 1, "resnet_64ch"),
    (4, 64, 7, 7, 64, (3, 3), 1, 1, 1, "7x7_rows_of_one_group"),
    (3, 32, 14, 14, 16, (3, 3), 1, 1, 1, "14x14_padded_rows"),
    (2, 8, 13, 17, 24, (3, 3), 1, 1, 1, "odd_image_partial_chunks"),
    (2, 16, 20, 112, 16, (3, 3), 1, 1, 1, "112_pixel_rows_whole"),
    (2, 16, 9, 150, 32, (3, 3), 1, 1, 1, "150_pixel_rows_in_pieces"),
    (3, 8, 17, 23, 16, (3, 5), (2, 1), (1, 2), (1, 2), "asymmetric_strided_dilated"),
    (2, 16, 28, 28, 24, (7, 7), 2, 3, 1, "7x7_stride2_six_tap_groups"),
    (2, 16, 15, 15, 16, (5, 5), 1, 2, 1, "5x5_three_tap_groups"),
    (1, 16, 10, 12, 200, (3, 3), 1, 4, 1, "padding_gt_kernel_four_output_channel_tiles"),
    (2, 72, 19, 23, 136, (3, 3), 2, 1, 1, "partial_channel_tiles_stride2"),
    (2, 64, 1, 1, 32, (3, 3), 1, 1, 1, "1x1_image"),
    (3, 32, 33, 65, 64, (1, 3), 2, (0, 1), 1, "1x3_stride2"),
    (2, 16, 40, 40, 16, (9, 1), 1, (4, 0), 1, "9x1"),
    (5, 16, 16, 16, 16, (2, 2), 2, 0, 1, "2x2_stride2"),
    (2, 16, 12, 12, 16, (1, 1), 2, 0, 1, "1x1_stride2"),
    (16, 64, 28, 28, 64, (3, 3), 1, 1, 1, "many_chunks"),
]
# Products of half-precision inputs are exact in float32 and summed there: the error is the result's own rounding
# (half an ulp: 2^-11 of the largest value in float16, 2^-8 in bfloat16), with a factor 2 of room.
TOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3}


@pytest.mark.parametrize("layout", [torch.channels_last, torch.contiguous_format], ids=["channels_last", "nchw"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
def test_against_float64(case, dtype, layout, monkeypatch):
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "direct")
    check_weight_grad(case, dtype, layout, _KERNEL, atol=TOL[dtype])


def test_runs_where_it_applies(monkeypatch):
    """By default the kernel takes float16 and bfloat16 weight gradients of one group with at most 64 channels on
    both sides, multiples of 8, and at most 9 taps, NCHW or channels_last; not beyond (CUTLASS's measured faster)
    unless CUSTOMOPS_CONV2D_ALGO=direct, not 1x1 unit-stride convolutions (one GEMM), not the stem's few channels, not
    under CUSTOMOPS_CONV2D_ALGO=implicit or =explicit."""
    def ran(dtype=torch.float16, **shape):
        return any(_KERNEL in n for n in weight_grad_kernel_names(dtype, **shape))

    assert ran()
    assert ran(dtype=torch.bfloat16)
    assert ran(c=64, k=64, hw=56)
    assert ran(c=8, k=64, layout=torch.contiguous_format)
    assert ran(ks=1, stride=2)
    assert not ran(c=72, k=64)
    assert not ran(c=64, k=128)
    assert not ran(ks=5)
    assert not ran(c=12)  # not a multiple of 8
    assert not ran(k=20)
    assert not ran(c=32, groups=2)
    assert not ran(dtype=torch.float32)
    assert not ran(ks=1)
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "direct")
    assert ran(c=64, k=128)
    assert ran(ks=5)
    assert ran(ks=1)
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "implicit")
    assert not ran()
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "explicit")
    assert not ran()
