"""python -m customops.benchmark.passes: conv2d's kernels per pass against cuDNN, in one run.

The conv2d benchmark's dense 3x3 cases (ResNet-50's 64 channels at 56x56 and 256 at 14x14, batch 64; the table's
256 channels at 56x56, batch 32), ResNeXt-50 32x4d's 3x3 grouped convolutions (32 groups of 4, 8, 16 and 32
channels, batch 64), the conv2d benchmark's ResNeXt case (groups of 8, 256 channels at 56x56, batch 32), the ResNet
stem (3 -> 64 channels, 7x7, stride 2, 224x224, batch 32) and a 4x4 patchify stem (3 -> 64, stride 4),
channels_last, float16, bfloat16, float32 and float32 as TF32 (both sides' TF32 flags off, then on): the forward,
the input gradient and the weight gradient of customops.conv2d as it runs (the implicit GEMM, or the direct
grouped, stem or weight-gradient kernels where they apply), with CUSTOMOPS_CONV2D_ALGO=explicit (im2col +
cuBLAS), and cuDNN's (F.conv2d / aten.convolution_backward), each as GPU time per call with the calls queued back
to back. `--only WORD` keeps the cases whose name holds WORD, `--dtypes` the dtypes named."""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import customops  # noqa: F401  (registers torch.ops.customops)

from .timing import env_set, queued_pass_ms, tf32

# name, N, C, H = W, K, kernel, stride, padding, groups
CASES = [("resnet 64ch56 b64", 64, 64, 56, 64, 3, 1, 1, 1),
         ("resnet 256ch14 b64", 64, 256, 14, 256, 3, 1, 1, 1),
         ("table 256ch56 b32", 32, 256, 56, 256, 3, 1, 1, 1),
         ("grouped g32 256ch56 b32", 32, 256, 56, 256, 3, 1, 1, 32),
         ("grouped s1 128ch56 b64", 64, 128, 56, 128, 3, 1, 1, 32),
         ("grouped s2 256ch28 b64", 64, 256, 28, 256, 3, 1, 1, 32),
         ("grouped s3 512ch14 b64", 64, 512, 14, 512, 3, 1, 1, 32),
         ("grouped s4 1024ch7 b64", 64, 1024, 7, 1024, 3, 1, 1, 32),
         ("stem 7x7 s2 3->64 224 b32", 32, 3, 224, 64, 7, 2, 3, 1),
         ("stem 4x4 s4 3->64 224 b32", 32, 3, 224, 64, 4, 4, 0, 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="keep the cases whose name holds this word")
    parser.add_argument("--dtypes", default="float16,bfloat16,float32,tf32",
                        help="comma-separated, of float16, bfloat16, float32, tf32")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("customops.benchmark.passes needs a CUDA device")
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    for label in args.dtypes.split(","):
        dt = getattr(torch, "float32" if label == "tf32" else label)
        for name, N, C, HW, K, ks, stride, pad, G in CASES:
            if args.only not in name:
                continue
            x = torch.randn(N, C, HW, HW, device=dev, dtype=dt).to(memory_format=torch.channels_last)
            w = (torch.randn(K, C // G, ks, ks, device=dev, dtype=dt) * .1).to(memory_format=torch.channels_last)
            g = torch.randn_like(F.conv2d(x, w, None, stride, pad, 1, G))
            win = ([stride] * 2, [pad] * 2, [1, 1])

            def backward(mask):
                return (lambda: torch.ops.customops.conv2d_backward(g, x, w, *win, G, mask),
                        lambda: torch.ops.aten.convolution_backward(g, x, w, None, *win, False, [0, 0], G, mask))

            fns = {
                "fwd": (lambda: torch.ops.customops.conv2d(x, w, None, *win, G),
                        lambda: F.conv2d(x, w, None, stride, pad, 1, G)),
                "dgrad": backward([True, False, False]),
                "wgrad": backward([False, True, False]),
            }
            row = f"{label:8s} {name:26s}"
            for p, (ours, cudnn) in fns.items():
                with tf32(label == "tf32", label == "tf32"):
                    c, o, e = queued_pass_ms(ours, cudnn, dev, lambda: env_set("CUSTOMOPS_CONV2D_ALGO", "explicit"))
                row += f" | {p} cudnn {c:.4f} direct {o:.4f} ({o / c:.2f}) explicit {e:.4f} ({e / c:.2f})"
            print(row, flush=True)


if __name__ == "__main__":
    main()
