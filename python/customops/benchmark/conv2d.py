"""python -m customops.benchmark.conv2d: conv2d's two CUDA algorithms against cuDNN, in one run.

For the convolutions of ResNet-50, ResNeXt and a stem (the shapes conv2d's algorithms were tuned on) and the benchmark table's
256->256 3x3 case, times customops.conv2d forward and forward+backward (input and weight gradients) with the
implicit-GEMM path or the direct grouped and stem kernels (the default where they apply) and with
CUSTOMOPS_CONV2D_ALGO=explicit (im2col + cuBLAS), against F.conv2d / aten.convolution_backward (cuDNN) on the same tensors, and prints ours / cuDNN, per call
timed alone and with the calls queued back to back. Layouts: channels_last and NCHW; dtypes float16, bfloat16,
and float32 with TF32 allowed (both libraries) or not."""

from __future__ import annotations

import argparse
import os
from contextlib import contextmanager

import torch
import torch.nn.functional as F

import customops

from .report import columns, markdown_table
from .timing import back_to_back_ms, median_ms, tf32 as tf32_flags

# name, (N, C, H, W), K, kernel, stride, padding, groups
CASES = [
    ("ResNet-50 3x3 64ch 56x56", (64, 64, 56, 56), 64, 3, 1, 1, 1),
    ("ResNet-50 3x3 256ch 14x14", (64, 256, 14, 14), 256, 3, 1, 1, 1),
    ("1x1 256->64 56x56", (64, 256, 56, 56), 64, 1, 1, 0, 1),
    ("ResNeXt 3x3 g32 256ch 56x56", (32, 256, 56, 56), 256, 3, 1, 1, 32),
    ("stem 7x7 s2 3->64 224x224", (32, 3, 224, 224), 64, 7, 2, 3, 1),
    ("table 3x3 256->256 56x56", (32, 256, 56, 56), 256, 3, 1, 1, 1),
]


@contextmanager
def _algo(name: str | None):
    old = os.environ.get("CUSTOMOPS_CONV2D_ALGO")
    if name is None:
        os.environ.pop("CUSTOMOPS_CONV2D_ALGO", None)
    else:
        os.environ["CUSTOMOPS_CONV2D_ALGO"] = name
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CUSTOMOPS_CONV2D_ALGO", None)
        else:
            os.environ["CUSTOMOPS_CONV2D_ALGO"] = old


def measure(case, dtype, layout, tf32, repeats):
    name, shape, k, ks, stride, pad, groups = case
    device = torch.device("cuda")
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x = torch.randn(shape, device=device, dtype=dtype).to(memory_format=fmt)
    w = (torch.randn(k, shape[1] // groups, ks, ks, device=device, dtype=dtype) * 0.05).to(memory_format=fmt)
    g = torch.randn_like(F.conv2d(x, w, None, stride, pad, 1, groups))
    win = ([stride] * 2, [pad] * 2, [1, 1])
    mask = [True, True, False]
    ours = {
        "fwd": lambda: customops.conv2d(x, w, None, stride, pad, 1, groups),
        "fwd+bwd": lambda: (customops.conv2d(x, w, None, stride, pad, 1, groups),
                            torch.ops.customops.conv2d_backward(g, x, w, *win, groups, mask)),
    }
    cudnn = {
        "fwd": lambda: F.conv2d(x, w, None, stride, pad, 1, groups),
        "fwd+bwd": lambda: (F.conv2d(x, w, None, stride, pad, 1, groups),
                            torch.ops.aten.convolution_backward(g, x, w, None, *win, False, [0, 0], groups, mask)),
    }
    out = {}
    with tf32_flags(tf32, tf32):
        for pass_ in ("fwd", "fwd+bwd"):
            ref = median_ms(cudnn[pass_], device, repeats=repeats)
            ref_queued = back_to_back_ms(cudnn[pass_], device, calls=repeats)
            with _algo(None):
                implicit = median_ms(ours[pass_], device, repeats=repeats)
                queued = back_to_back_ms(ours[pass_], device, calls=repeats)
            with _algo("explicit"):
                explicit = median_ms(ours[pass_], device, repeats=repeats)
            out[pass_] = (implicit, explicit, ref, queued / ref_queued)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--markdown", help="append the table to this Markdown file")
    parser.add_argument("--quick", action="store_true", help="channels_last float16 only")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("customops.benchmark.conv2d needs a CUDA device")
    torch.backends.cudnn.benchmark = True  # cuDNN at its best: its autotuned algorithm per shape
    configs = [("channels_last", torch.float16, False), ("channels_last", torch.bfloat16, False)]
    if not args.quick:
        configs += [("channels_last", torch.float32, True), ("contiguous", torch.float16, False),
                    ("contiguous", torch.bfloat16, False), ("channels_last", torch.float32, False)]
    header = ("case", "layout", "dtype", "pass", "default ms", "explicit ms", "cuDNN ms", "default/cuDNN",
              "explicit/cuDNN", "default/cuDNN queued")
    rows = []
    for layout, dtype, tf32 in configs:
        for case in CASES:
            for pass_, (imp, exp, ref, queued) in measure(case, dtype, layout, tf32, args.repeats).items():
                dt = str(dtype).replace("torch.", "") + (" tf32" if tf32 else "")
                rows.append((case[0], layout, dt, pass_, f"{imp:.4f}", f"{exp:.4f}", f"{ref:.4f}",
                             f"{imp / ref:.2f}", f"{exp / ref:.2f}", f"{queued:.2f}"))
                print(columns([header, rows[-1]]).splitlines()[1], flush=True)
    print(columns([header] + rows))
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n" + markdown_table(
                f"Command: `python -m customops.benchmark.conv2d`, {torch.cuda.get_device_name()}, torch "
                f"{torch.__version__}, cudnn.benchmark on; median of {args.repeats} calls each timed alone "
                "(CUDA events around one call, so host launch time counts). \"default\" is conv2d as it runs "
                "(implicit GEMM, or the direct kernels for groups > 1, few-channel stems, float32 weight "
                "gradients in TF32 and half-type weight gradients of at most 64 channels, where they apply), "
                "\"explicit\" is CUSTOMOPS_CONV2D_ALGO=explicit (im2col + "
                f"cuBLAS). \"queued\" is the ratio of GPU time per call with {args.repeats} calls queued back "
                "to back behind a sleep kernel, as in a training step (launch time hidden). Ratios below 1 are "
                "faster than cuDNN.",
                header, rows))


if __name__ == "__main__":
    main()
