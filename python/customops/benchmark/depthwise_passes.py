"""python -m customops.benchmark.depthwise_passes: depthwise_conv2d's channels_last kernels per pass against cuDNN.

MobileNetV2's 3x3 depthwise layer shapes (batch 128) and ConvNeXt-T's 7x7 ones (batch 64), channels_last, in
float32, float16 and bfloat16: the forward, the input gradient and the weight gradient of customops as it runs
(3x3: the column kernels; half types' 7x7 forward and input gradient: the tensor-core kernel), with
CUSTOMOPS_DEPTHWISE_ALGO=rows (the row-streaming kernels), and cuDNN's
(F.conv2d / aten.convolution_backward), each as GPU time per call with the calls queued back to back, so no
launch gap is counted. The forward's share of the copy bandwidth (input + output bytes over the time, against a
device copy measured in the same run) is the measure of a pass. `--only WORD` keeps the cases whose name holds WORD."""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import customops  # noqa: F401  (registers torch.ops.customops)

from .timing import copy_bandwidth, queued_pass_ms

# name, N, C, H = W, kernel, stride
CASES = [("mobilenet 32ch112", 128, 32, 112, 3, 1), ("mobilenet 96ch112 s2", 128, 96, 112, 3, 2),
         ("mobilenet 144ch56", 128, 144, 56, 3, 1), ("mobilenet 144ch56 s2", 128, 144, 56, 3, 2),
         ("mobilenet 192ch28", 128, 192, 28, 3, 1), ("mobilenet 384ch14", 128, 384, 14, 3, 1),
         ("mobilenet 576ch14", 128, 576, 14, 3, 1), ("mobilenet 960ch7", 128, 960, 7, 3, 1),
         ("convnext 96ch56 k7", 64, 96, 56, 7, 1), ("convnext 192ch28 k7", 64, 192, 28, 7, 1),
         ("convnext 384ch14 k7", 64, 384, 14, 7, 1), ("convnext 768ch7 k7", 64, 768, 7, 7, 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="keep the cases whose name holds this word")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("customops.benchmark.depthwise_passes needs a CUDA device")
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    bandwidth = copy_bandwidth(dev, 256 << 20)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, copy {bandwidth / 1e9:.0f} GB/s (read + write)")
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for name, N, C, HW, ks, stride in CASES:
            if args.only not in name:
                continue
            x = torch.randn(N, C, HW, HW, device=dev, dtype=dt).to(memory_format=torch.channels_last)
            w = torch.randn(C, 1, ks, ks, device=dev, dtype=dt) / ks
            pad = ks // 2
            y = F.conv2d(x, w, None, stride, pad, 1, C)
            g = torch.randn_like(y)
            win = ([stride] * 2, [pad] * 2, [1, 1])

            def backward(mask):
                return (lambda: torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, mask),
                        lambda: torch.ops.aten.convolution_backward(g, x, w, None, *win, False, [0, 0], C, mask))

            fns = {
                "fwd": (lambda: torch.ops.customops.depthwise_conv2d(x, w, None, *win),
                        lambda: F.conv2d(x, w, None, stride, pad, 1, C)),
                "dgrad": backward([True, False, False]),
                "wgrad": backward([False, True, False]),
            }
            row = f"{str(dt)[6:]:8s} {name:21s}"
            for p, (ours, cudnn) in fns.items():
                c, o, r = queued_pass_ms(ours, cudnn, dev, "CUSTOMOPS_DEPTHWISE_ALGO", "rows")
                row += f" | {p} cudnn {c:.4f} ours {o:.4f} ({o / c:.2f}) rows {r:.4f} ({r / c:.2f})"
                if p == "fwd":
                    share = (x.numel() + y.numel()) * x.element_size() / bandwidth * 1e3
                    row += f" copy {share / o:.0%} (cudnn {share / c:.0%})"
            print(row, flush=True)


if __name__ == "__main__":
    main()
