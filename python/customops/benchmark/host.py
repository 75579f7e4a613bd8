"""python -m customops.benchmark.host: the host's microseconds per call of a converted depthwise layer against
nn.Conv2d's, per mode, on tensors small enough that the GPU never sets the pace.

    python -m customops.benchmark.host [--device cuda|cpu] [--rounds N] [--markdown F.md]

Modes: forward under no_grad; forward + backward; the same under autocast bf16; forward + backward of the layer
torch.compile'd (the custom op called from Inductor's wrapper). For customops, each backend policy
(customops.backends): auto, customops, pytorch. Each figure: the median over rounds of the mean time of 200 calls
queued without synchronization (the host's time: launches, dispatch, autograd); nn.Conv2d, the layer under each
policy and the op alone take turns round by round. "op alone" calls torch.ops.customops.depthwise_conv2d with the
layer's tensors, so that the layer's column less this one is the Python module's own cost. On the CPU (--device cpu)
the kernels run on the host too: nn.Conv2d's column there is its CPU kernel's time, and only the customops columns
compare (the module's Python against the op's dispatch).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time

import torch
from torch import nn

import customops

from .models import device_name
from .report import columns, markdown_table

MODES = ("no_grad forward", "forward + backward", "autocast bf16 forward + backward", "compiled forward + backward")


class OpAlone(nn.Module):
    """The converted layer's op called directly: what the layer costs without its Python module."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer
        self.op = torch.ops.customops.depthwise_conv2d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.layer
        return self.op(x, m.weight, m.bias, m.stride, m._conv_padding, m.dilation)


def step_fn(layer: nn.Module, x: torch.Tensor, mode: str):
    if mode == "no_grad forward":
        def step():
            with torch.no_grad():
                layer(x)
        return step
    xg = x.detach().requires_grad_()
    amp = mode.startswith("autocast")

    def step():
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
            y = layer(xg)
        y.sum().backward()
    return step


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def host_us(steps: list, calls: int, rounds: int, device: torch.device, setups: list | None = None) -> list[float]:
    """Each step's host time per call: the median over rounds of the mean of `calls` calls, the steps taking turns
    (forwards, then backwards, round by round) so that a drift of the machine falls on all of them. setups[i], if
    given, runs before step i's calls, outside the timing (a backend policy)."""
    setups = setups or [lambda: None for _ in steps]
    for setup, step in zip(setups, steps):
        setup()
        for _ in range(20):
            step()
    times = [[] for _ in steps]
    for r in range(rounds):
        for i in (range(len(steps)) if r % 2 == 0 else reversed(range(len(steps)))):
            setups[i]()
            _sync(device)
            start = time.perf_counter()
            for _ in range(calls):
                steps[i]()
            times[i].append((time.perf_counter() - start) / calls * 1e6)
            _sync(device)
    return [statistics.median(t) for t in times]


def _policy(backend: str):
    return lambda: customops.backends.set("depthwise_conv2d", backend)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.host", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    backends = ("auto", "customops", "pytorch") if device.type == "cuda" else ("customops",)
    header = ("mode", "layout", "nn.Conv2d us", *(f"customops {b} us" for b in backends), "op alone us",
              f"{backends[0]} - nn.Conv2d us")
    rows = []
    for memory_format, layout in ((torch.channels_last, "channels_last"), (torch.contiguous_format, "NCHW")):
        ref = nn.Conv2d(32, 32, 3, 1, 1, groups=32, bias=True).to(device, memory_format=memory_format)
        ours = customops.convert(ref)
        x = torch.randn(2, 32, 8, 8, device=device).contiguous(memory_format=memory_format)
        for mode in MODES:
            layers = [ref, ours, OpAlone(ours)]
            if mode.startswith("compiled"):
                torch._dynamo.reset()
                layers = [torch.compile(m) for m in layers]
            # nn.Conv2d, the layer under each policy and the op alone (under auto) take turns in the same rounds.
            ref_step, ours_step, alone_step = (step_fn(m, x, mode) for m in layers)
            steps = [ref_step, *(ours_step for _ in backends), alone_step]
            setups = [_policy("auto"), *(_policy(b) for b in backends), _policy("auto")]
            before = customops.backends.get("depthwise_conv2d")
            try:
                ref_us, *ours_us, alone_us = host_us(steps, args.calls, args.rounds, device, setups)
            finally:
                customops.backends.set("depthwise_conv2d", before)
            measured = dict(zip(backends, ours_us))
            rows.append((mode, layout, f"{ref_us:.1f}", *(f"{measured[b]:.1f}" for b in backends),
                         f"{alone_us:.1f}", f"{measured[backends[0]] - ref_us:+.1f}"))
            print(columns([header, rows[-1]]).splitlines()[1], flush=True)
    print()
    print(columns([header] + rows))
    if args.markdown:
        command = "python -m customops.benchmark.host " + " ".join(sys.argv[1:] if argv is None else argv)
        now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        preamble = (f"Measured on {device_name(device)}, torch {torch.__version__}, {now}.\n\nCommand: `{command}`. A "
                    "depthwise 3x3 layer with bias, 32 channels, input 2x32x8x8 (float32): microseconds of host "
                    f"time per call, the median of {args.rounds} rounds of {args.calls} calls.")
        with open(args.markdown, "w") as f:
            f.write(markdown_table(preamble, header, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
