"""python -m customops.benchmark.breakdown: where conv2d's GPU time goes.

Profiles customops.conv2d forward and backward (input and weight gradients) on
CUDA at the benchmark's size, NCHW and channels_last, and sums kernel time by kind:
im2col, col2im, implicit GEMM (the CUTLASS kernels), GEMM (cuBLAS) and the rest
(bias, weight-gradient sums, layout conversions)."""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

import customops

from .report import columns


def kind(kernel: str) -> str:
    name = kernel.lower()
    if "convuniversal" in name:  # CUTLASS's convolution kernels (conv2d's implicit GEMM; their names say Im2Col)
        return "implicit GEMM"
    for key in ("im2col", "col2im"):
        if key in name:
            return key
    if any(k in name for k in ("gemm", "cutlass", "xmma", "sm90", "sm80", "cublas", "nvjet")):
        return "GEMM"
    return "other"


def profile_ms(fn, repeats: int) -> dict[str, float]:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        device_us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[kind(event.key)] += device_us / 1e3 / repeats
    return dict(totals)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--markdown", help="append the table as Markdown to this file")
    args = p.parse_args(argv)
    kinds = ("im2col", "col2im", "implicit GEMM", "GEMM", "other")
    rows = [("dtype", "layout", "pass", *(f"{k} ms" for k in kinds), "total ms")]
    for dtype, layout in ((torch.float32, torch.contiguous_format), (torch.float16, torch.contiguous_format),
                          (torch.float16, torch.channels_last)):
        x = torch.randn(args.batch, 256, 56, 56, device="cuda", dtype=dtype).to(memory_format=layout)
        w = (torch.randn(256, 256, 3, 3, device="cuda", dtype=dtype) / 48).to(memory_format=layout)
        g = torch.randn_like(x)
        passes = {
            "forward": lambda: customops.conv2d(x, w, None, 1, 1),
            "backward": lambda: torch.ops.customops.conv2d_backward(g, x, w, [1, 1], [1, 1], [1, 1], 1,
                                                                    [True, True, False]),
        }
        for name, fn in passes.items():
            t = profile_ms(fn, args.repeats)
            cells = [t.get(k, 0.0) for k in kinds]
            rows.append((str(dtype).removeprefix("torch."), "NCHW" if layout == torch.contiguous_format else "NHWC",
                         name, *(f"{c:.3f}" for c in cells), f"{sum(cells):.3f}"))
    print(f"conv2d {args.batch}x256x56x56, 3x3, 256->256, on {torch.cuda.get_device_name()} "
          "(kernel time from torch.profiler, per call)")
    print(columns(rows))
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(f"\n## Where conv2d's time goes\n\nCommand: `python -m customops.benchmark.breakdown`. "
                    f"{args.batch}x256x56x56 input, 3x3, 256->256 channels, float32 without TF32, float16; kernel time "
                    f"per call from torch.profiler on {torch.cuda.get_device_name()}.\n\n")
            f.write("| " + " | ".join(rows[0]) + " |\n|" + "---|" * len(rows[0]) + "\n")
            f.writelines("| " + " | ".join(r) + " |\n" for r in rows[1:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
