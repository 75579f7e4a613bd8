"""python -m customops.benchmark.host: the host's microseconds per call of a converted depthwise layer against
nn.Conv2d's, per mode, on tensors small enough that the GPU never sets the pace.

    python -m customops.benchmark.host [--markdown F.md]

Modes: forward under no_grad; forward + backward; the same under autocast bf16; forward + backward of the
layer torch.compile'd (the custom op called from Inductor's wrapper). For customops, each backend policy
(customops.backends): auto, customops, pytorch. Each figure: the median over rounds of the mean time of 200
calls queued without synchronization (the host's time: launches, dispatch, autograd); the two layers
alternate round by round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

import customops

from .models import device_name
from .report import columns, markdown_table

MODES = ("no_grad forward", "forward + backward", "autocast bf16 forward + backward", "compiled forward + backward")


def step_fn(layer: nn.Module, x: torch.Tensor, mode: str):
    if mode == "no_grad forward":
        def step():
            with torch.no_grad():
                layer(x)
        return step
    xg = x.detach().requires_grad_()
    amp = mode.startswith("autocast")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            y = layer(xg)
        y.sum().backward()
    return step


def host_us(steps: list, calls: int, rounds: int) -> list[float]:
    for step in steps:
        for _ in range(20):
            step()
    times = [[] for _ in steps]
    for r in range(rounds):
        for i in (range(len(steps)) if r % 2 == 0 else reversed(range(len(steps)))):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                steps[i]()
            times[i].append((time.perf_counter() - start) / calls * 1e6)
            torch.cuda.synchronize()
    return [statistics.median(t) for t in times]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.host", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    device = torch.device("cuda")
    header = ("mode", "layout", "nn.Conv2d us", *(f"customops {b} us" for b in ("auto", "customops", "pytorch")),
              "auto - nn.Conv2d us")
    rows = []
    for memory_format, layout in ((torch.channels_last, "channels_last"), (torch.contiguous_format, "NCHW")):
        ref = nn.Conv2d(32, 32, 3, 1, 1, groups=32, bias=True).to(device, memory_format=memory_format)
        ours = customops.convert(ref)
        x = torch.randn(2, 32, 8, 8, device=device).contiguous(memory_format=memory_format)
        for mode in MODES:
            layers = [ref, ours]
            if mode.startswith("compiled"):
                torch._dynamo.reset()
                layers = [torch.compile(ref), torch.compile(ours)]
            measured, refs = {}, []
            ref_step, our_step = step_fn(layers[0], x, mode), step_fn(layers[1], x, mode)
            for backend in ("auto", "customops", "pytorch"):
                with customops.backends.use("depthwise_conv2d", backend):
                    ref_us, measured[backend] = host_us([ref_step, our_step], args.calls, args.rounds)
                refs.append(ref_us)
            measured["ref"] = statistics.median(refs)  # nn.Conv2d ran beside each policy
            rows.append((mode, layout, f"{measured['ref']:.1f}", *(f"{measured[b]:.1f}" for b in
                                                                   ("auto", "customops", "pytorch")),
                         f"{measured['auto'] - measured['ref']:+.1f}"))
            print(columns([header, rows[-1]]).splitlines()[1], flush=True)
    print()
    print(columns([header] + rows))
    if args.markdown:
        command = "python -m customops.benchmark.host " + " ".join(sys.argv[1:] if argv is None else argv)
        preamble = (f"Measured on {device_name(device)}, torch {torch.__version__}.\n\nCommand: `{command}`. A "
                    "depthwise 3x3 layer with bias, 32 channels, input 2x32x8x8 (float32): microseconds of host "
                    f"time per call, the median of {args.rounds} rounds of {args.calls} calls.")
        with open(args.markdown, "w") as f:
            f.write(markdown_table(preamble, header, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
