"""conv2d's float32 weight gradient in TF32 (kernels/cuda/conv2d/tf32_wgrad.cu) against float64 gradients:
kernels of more than 9 taps (several tap groups), stages of several short rows and pieces of long rows, partial
channel tiles, strides, dilation, padding beyond the kernel, batches split over many chunks, NCHW and
channels_last; and where it runs (the profiler's kernel names) and where the call stays on another path."""

from __future__ import annotations

import pytest
import torch

from conftest import check_weight_grad, requires_cuda, weight_grad_kernel_names

pytestmark = [
    requires_cuda,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 0),
                       reason="the TF32 kernel needs compute capability 8.0"),
    pytest.mark.torch_independent,
]

_KERNEL = "tf32_weight_grad"

# (N, C, H, W, K, (kh, kw), stride, padding, dilation, name)
CASES = [
    (2, 16, 12, 12, 32, (3, 3), 1, 1, 1, "3x3"),
    (3, 8, 17, 23, 16, (3, 5), (2, 1), (1, 2), (1, 2), "asymmetric_strided_dilated"),
    (2, 16, 28, 28, 24, (7, 7), 2, 3, 1, "7x7_stride2_six_tap_groups"),
    (2, 68, 130, 70, 36, (5, 5), 1, 2, 1, "long_rows_three_tap_groups_partial_channel_tiles"),
    (1, 16, 10, 12, 200, (3, 3), 1, 4, 1, "padding_gt_kernel_four_output_channel_tiles"),
    (4, 60, 9, 11, 136, (3, 3), 1, 1, 1, "short_rows_partial_tiles"),
    (2, 12, 10, 10, 20, (3, 3), 1, 1, 1, "c12_k20"),
    (2, 64, 1, 1, 32, (3, 3), 1, 1, 1, "1x1_image"),
    (3, 32, 33, 150, 64, (1, 3), 2, (0, 1), 1, "1x3_stride2_wide"),
    (2, 16, 40, 40, 16, (9, 1), 1, (4, 0), 1, "9x1"),
    (2, 16, 16, 16, 16, (2, 2), 2, 0, 1, "2x2_stride2"),
    (2, 16, 12, 12, 16, (1, 1), 2, 0, 1, "1x1_stride2"),
    (8, 64, 56, 56, 64, (3, 3), 1, 1, 1, "resnet_64ch_many_chunks"),
    (16, 512, 7, 7, 512, (3, 3), 1, 1, 1, "resnet_512ch_7x7"),
]


@pytest.mark.parametrize("layout", [torch.channels_last, torch.contiguous_format], ids=["channels_last", "nchw"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
def test_against_float64(case, layout, tf32):
    # TF32 operands keep 10 mantissa bits: about 3e-4 of the largest value was measured, float32 products 1e-7.
    check_weight_grad(case, torch.float32, layout, _KERNEL, atol=3e-3)


def test_runs_where_it_applies(monkeypatch):
    """The kernel takes float32 weight gradients with TF32 allowed, one group, channels multiples of 4; not
    without TF32, under CUSTOMOPS_CONV2D_ALGO=explicit, for 1x1 unit-stride convolutions (one cuBLAS GEMM, unless
    CUSTOMOPS_CONV2D_ALGO=implicit), for groups, or where the explicit path measured faster (images of more than
    196 output pixels with more than 256 channels on both sides, or more than 64 and a stride for NCHW inputs;
    CUSTOMOPS_CONV2D_ALGO=implicit lifts that rule)."""
    def ran(tf32=True, dtype=torch.float32, **shape):
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            names = weight_grad_kernel_names(dtype, **shape)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        return any(_KERNEL in n for n in names)

    assert ran()
    assert ran(layout=torch.contiguous_format)
    assert ran(c=12, k=20)
    assert ran(c=256, k=256, hw=16)  # channels_last: up to 256 channels on any image
    assert ran(c=512, k=512, hw=14)  # more on images of at most 196 output pixels
    assert not ran(c=512, k=512, hw=15)
    assert ran(c=128, k=128, hw=15, layout=torch.contiguous_format)  # NCHW, unit stride: any image
    assert ran(c=128, k=128, hw=28, stride=2, layout=torch.contiguous_format)  # strided: up to 196 output pixels
    assert not ran(c=128, k=128, hw=30, stride=2, layout=torch.contiguous_format)
    assert ran(c=128, k=128, hw=30, stride=2)  # channels_last
    assert ran(c=64, k=256, hw=30, stride=2, layout=torch.contiguous_format)
    assert not ran(tf32=False)
    assert not ran(c=6)  # not a multiple of 4
    assert not ran(k=18)
    assert not ran(groups=2)
    assert not ran(dtype=torch.float64)
    assert not ran(dtype=torch.float16)
    assert not ran(ks=1)
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "implicit")
    assert ran(ks=1)
    assert ran(c=512, k=512, hw=15)
    monkeypatch.setenv("CUSTOMOPS_CONV2D_ALGO", "explicit")
    assert not ran()
