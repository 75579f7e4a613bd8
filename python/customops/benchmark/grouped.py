"""python -m customops.benchmark.grouped: conv2d's grouped kernels per pass against cuDNN, in one run.

ResNeXt-50 32x4d's 3x3 grouped convolutions (32 groups of 4, 8, 16 and 32 channels, batch 64) and the conv2d
benchmark's ResNeXt case (groups of 8, 256 channels at 56x56, batch 32), channels_last, float16 and float32:
the forward, the input gradient and the weight gradient of customops.conv2d as it runs (the direct grouped
kernels), with CUSTOMOPS_CONV2D_ALGO=explicit (im2col + cuBLAS), and cuDNN's (F.conv2d /
aten.convolution_backward), each as GPU time per call with the calls queued back to back."""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

import customops  # noqa: F401  (registers torch.ops.customops)

from .timing import back_to_back_ms

# name, N, C (= K), H = W, groups
CASES = [("bench g32 256ch56 b32", 32, 256, 56, 32), ("s1 128ch56 b64", 64, 128, 56, 32),
         ("s2 256ch28 b64", 64, 256, 28, 32), ("s3 512ch14 b64", 64, 512, 14, 32), ("s4 1024ch7 b64", 64, 1024, 7, 32)]


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("customops.benchmark.grouped needs a CUDA device")
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    t = lambda fn: back_to_back_ms(fn, dev, calls=30)  # noqa: E731
    for dt in (torch.float16, torch.float32):
        for name, N, C, HW, G in CASES:
            x = torch.randn(N, C, HW, HW, device=dev, dtype=dt).to(memory_format=torch.channels_last)
            w = (torch.randn(C, C // G, 3, 3, device=dev, dtype=dt) * .1).to(memory_format=torch.channels_last)
            g = torch.randn(N, C, HW, HW, device=dev, dtype=dt).to(memory_format=torch.channels_last)
            win = ([1, 1], [1, 1], [1, 1])
            fns = {
                "fwd": (lambda: torch.ops.customops.conv2d(x, w, None, *win, G),
                        lambda: F.conv2d(x, w, None, 1, 1, 1, G)),
                "dgrad": (lambda: torch.ops.customops.conv2d_backward(g, x, w, *win, G, [True, False, False]),
                          lambda: torch.ops.aten.convolution_backward(g, x, w, None, *win, False, [0, 0], G,
                                                                      [True, False, False])),
                "wgrad": (lambda: torch.ops.customops.conv2d_backward(g, x, w, *win, G, [False, True, False]),
                          lambda: torch.ops.aten.convolution_backward(g, x, w, None, *win, False, [0, 0], G,
                                                                      [False, True, False])),
            }
            row = f"{str(dt)[6:]:8s} {name:22s}"
            for p, (ours, cudnn) in fns.items():
                c = t(cudnn)
                o = t(ours)
                os.environ["CUSTOMOPS_CONV2D_ALGO"] = "explicit"
                e = t(ours)
                os.environ.pop("CUSTOMOPS_CONV2D_ALGO")
                row += f" | {p} cudnn {c:.4f} direct {o:.4f} ({o / c:.2f}) explicit {e:.4f} ({e / c:.2f})"
            print(row, flush=True)


if __name__ == "__main__":
    main()
