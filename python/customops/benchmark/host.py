"""python -m customops.benchmark.host: the host's microseconds per call of a converted depthwise layer against
nn.Conv2d's, per mode, on tensors small enough that the GPU never sets the pace; with --model, of every depthwise
layer shape of a zoo model at its real size, behind a GPU sleep.

    python -m customops.benchmark.host [--device cuda|cpu] [--rounds N] [--markdown F.md]
    python -m customops.benchmark.host --model efficientnet_b0[,...] [--batch 128] [--size 224] [--windows N]
        [--markdown F.md]

Modes: forward under no_grad; forward + backward; the same under autocast bf16; forward + backward of the layer
torch.compile'd (the custom op called from Inductor's wrapper). For customops, each backend policy
(customops.backends): auto, customops, pytorch. Each figure: the median over rounds of the mean time of 200 calls
queued without synchronization (the host's time: launches, dispatch, autograd); nn.Conv2d, the layer under each
policy and the op alone take turns round by round. "op alone" calls torch.ops.customops.depthwise_conv2d with the
layer's tensors, so that the layer's column less this one is the Python module's own cost. On the CPU (--device cpu)
the kernels run on the host too: nn.Conv2d's column there is its CPU kernel's time, and only the customops columns
compare (the module's Python against the op's dispatch). Python's garbage collector is paused while timing, as
timeit has it (customops.benchmark.timing.gc_paused).

--model (CUDA): each distinct depthwise layer of the model (a 224x224 forward finds them; --size scales their
planes) at batch --batch, and the small 2x32x8x8 layer above, bf16 autocast and channels_last as the zoo trains:
the forward and the forward + backward of nn.Conv2d and of the converted layer under each policy, on an input that
requires grad. A long GPU sleep is queued before each window of calls, so the host never waits for the GPU and the
clock reads its issue time alone (a window the GPU caught up with is counted and left out); within a window the
variants take turns call by call, so that a drift of the host falls on all of them. Each figure is the median over
the windows' calls; auto's against nn.Conv2d's, the median over the windows of their difference within a window,
with its quartiles. After each model's layers, their sums (each layer as often as the model runs it): what
converting changes in the host's time per training step.
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

from . import zoo
from .models import device_name
from .report import columns, markdown_table
from .timing import GpuSleep, gc_paused

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
    with gc_paused():
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

POLICIES = ("auto", "customops", "pytorch")
PASSES = ("forward", "forward + backward")
SMALL_LAYER = (32, 8, 8, (3, 3), (1, 1), (1, 1), (1, 1), True)  # the small layer above, (C, H, W, ...) as zoo's


def model_layers(name: str, size: int) -> dict[tuple, int]:
    """The model's distinct depthwise layers (zoo.depthwise_layers' tuples) with how often each runs per forward."""
    found: dict[tuple, int] = {}
    for shape in zoo.depthwise_layers(zoo.build(name), torch.randn(1, 3, size, size)):
        found[shape] = found.get(shape, 0) + 1
    return found


def layer_steps(shape: tuple, batch: int, device: torch.device) -> tuple[dict, torch.Tensor]:
    """nn.Conv2d and its converted copy for a layer shape, channels_last, and the step of each pass: forward (its
    result returned) under bf16 autocast on an input that requires grad; the backward of a given gradient."""
    c, h, w, k, stride, padding, dilation, bias = shape
    torch.manual_seed(0)
    ref = nn.Conv2d(c, c, k, stride, padding, dilation, groups=c, bias=bias)
    ref = ref.to(device, memory_format=torch.channels_last)
    ours = customops.convert(ref, inplace=False).to(memory_format=torch.channels_last)
    x = torch.randn(batch, c, h, w, device=device, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    x.requires_grad_()

    def forward(layer):
        def step():
            with torch.autocast(device.type, dtype=torch.bfloat16):
                return layer(x)
        return step

    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
        g = torch.randn_like(ref(x))
    return {"nn.Conv2d": forward(ref), "customops": forward(ours)}, g


class Windows:
    """The host microseconds of each call, per variant, window by window (the windows the GPU caught up with are
    counted and left out)."""

    def __init__(self) -> None:
        self.kept: list[dict[str, list[float]]] = []
        self.caught_up = 0

    def median(self, name: str) -> float:
        """The median over every kept call of the variant."""
        calls = [t for window in self.kept for t in window[name]]
        return statistics.median(calls) if calls else float("nan")

    def difference(self, name: str, reference: str) -> tuple[float, float, float]:
        """name's median less reference's within each window, over the windows: the median and the lower and upper
        quartiles. The variants of a window take turns on the same host, so a host that drifts between windows (a
        clock, another process) moves both sides of a window's difference alike and leaves it out of the figure."""
        d = [statistics.median(w[name]) - statistics.median(w[reference]) for w in self.kept]
        if not d:
            return (float("nan"),) * 3
        if len(d) == 1:
            return d[0], d[0], d[0]
        q1, _, q3 = statistics.quantiles(d, n=4, method="inclusive")
        return statistics.median(d), q1, q3


def interleaved_us(variants: dict, g: torch.Tensor, sleep, windows: int, per: int, backward: bool,
                   sync=None) -> Windows:
    """Per variant (name -> (setup, forward step)): the host microseconds of each call (forward, or forward +
    backward), the variants taking turns call by call in windows queued behind a GPU sleep (sleep(ms) queues one and
    returns an event whose query() says whether the GPU got past it: then the host may have waited, and the window
    is left out); sync() waits for the device (torch.cuda.synchronize by default)."""
    sync = sync or torch.cuda.synchronize
    names = list(variants)
    for name in names:
        setup, forward = variants[name]
        setup()
        for _ in range(3):
            y = forward()
            if backward:
                y.backward(g)
    sync()
    # Long enough to cover the window's calls: a warm-up window timed without a sleep, four times over.
    start = time.perf_counter()
    for name in names:
        variants[name][0]()
        y = variants[name][1]()
        if backward:
            y.backward(g)
    del y
    sleep_ms = max(20.0, 4e3 * (time.perf_counter() - start) * per)
    sync()
    result = Windows()
    with gc_paused():
        for window in range(windows):
            asleep = sleep(sleep_ms)
            taken: dict[str, list[float]] = {n: [] for n in names}
            for turn in range(per):
                k = (window * per + turn) % len(names)
                order = names[k:] + names[:k]
                for name in (order if turn % 2 == 0 else order[::-1]):
                    setup, forward = variants[name]
                    setup()
                    t0 = time.perf_counter()
                    y = forward()
                    if backward:
                        y.backward(g)
                    taken[name].append((time.perf_counter() - t0) * 1e6)
                    del y
            if asleep.query():  # the sleep was over: the GPU may have made the host wait
                result.caught_up += 1
            else:
                result.kept.append(taken)
            sync()
    return result


def _routed(shape: tuple, batch: int) -> str:
    c, h, w, k, stride, padding, dilation, bias = shape
    rule = customops.backends.depthwise_conv2d_rule((batch, c, h, w), (c, 1, *k), torch.bfloat16, True, bias, stride,
                                                    padding, dilation)
    passes = [p.replace("_grad", " grad") for p, impl in rule.items() if impl == "pytorch"]
    return ", ".join(passes) if passes else "none"


def _write_model_table(args, device: torch.device, header: tuple, rows: list) -> None:
    command = "python -m customops.benchmark.host " + " ".join(args.argv)
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    preamble = (f"Measured on {device_name(device)}, torch {torch.__version__}, {now}.\n\nCommand: `{command}`. "
                f"Every distinct depthwise layer of the models at batch {args.batch} ({args.size}x{args.size} "
                "images), and the small 2x32x8x8 layer, bf16 autocast, channels_last, on an input that requires "
                "grad: microseconds of host time per call of nn.Conv2d and of the converted layer under each "
                "policy, timed behind a GPU sleep (the host never waits for the GPU), the variants taking turns "
                f"call by call; the median of {args.windows} windows of {args.per} calls each. \"auto - "
                "nn.Conv2d\": the two medians' difference within each window, its median over the windows and "
                "quartiles (the spread). \"rule: to PyTorch\": the passes that auto hands to PyTorch's "
                "convolution (cuDNN). \"all its depthwise layers\": a model's sums over its layers, each as often "
                "as the model runs it, of the figures above (auto less nn.Conv2d: what converting changes in the "
                "host's time per step).")
    with open(args.markdown, "w") as f:
        f.write(markdown_table(preamble, header, rows))


def model_main(args) -> int:
    device = torch.device("cuda")
    if not torch.cuda.is_available():
        raise SystemExit("--model times CUDA layers behind a GPU sleep: no CUDA device here")
    sleep = GpuSleep(device)
    header = ("model", "layer (C, plane, kernel, stride)", "layers", "rule: to PyTorch", "pass", "nn.Conv2d us",
              *(f"{p} us" for p in POLICIES), "auto - nn.Conv2d us [quartiles]")
    rows = []

    def add(row: tuple) -> None:
        rows.append(row)
        print(columns([header, row]).splitlines()[1], flush=True)

    groups: list[tuple[str, list[tuple[tuple, int]]]] = [("small layer", [(SMALL_LAYER, 1)])]
    groups += [(name, list(model_layers(name, args.size).items())) for name in zoo.model_names(args.model)]
    before = customops.backends.get("depthwise_conv2d")
    try:
        for name, layers in groups:
            # Per pass, the model's sums (each layer as often as the model runs it): nn.Conv2d, each policy, and
            # auto less nn.Conv2d, what converting changes in the host's time per step.
            totals = {pass_name: [0.0] * (2 + len(POLICIES)) for pass_name in PASSES}
            for shape, count in layers:
                batch = 2 if shape is SMALL_LAYER else args.batch
                steps, g = layer_steps(shape, batch, device)
                variants = {"nn.Conv2d": (_policy("auto"), steps["nn.Conv2d"]),
                            **{p: (_policy(p), steps["customops"]) for p in POLICIES}}
                c, h, w, k, stride = shape[:5]
                for pass_name in PASSES:
                    timed = interleaved_us(variants, g, sleep, args.windows, args.per, pass_name != "forward")
                    note = f" ({timed.caught_up} windows caught up)" if timed.caught_up else ""
                    diff, low, high = timed.difference("auto", "nn.Conv2d")
                    medians = [timed.median(v) for v in ("nn.Conv2d", *POLICIES)]
                    for i, value in enumerate([*medians, diff]):
                        totals[pass_name][i] += count * value
                    add((name, f"{c}, {batch}x{h}x{w}, {k[0]}x{k[1]}, {stride[0]}", str(count), _routed(shape, batch),
                         pass_name + note, *(f"{m:.1f}" for m in medians), f"{diff:+.1f} [{low:+.1f}, {high:+.1f}]"))
                del steps, g, variants
                if args.markdown:  # after every layer: a run cut short keeps what it measured
                    _write_model_table(args, device, header, rows)
            if name != "small layer":
                for pass_name, (*medians, diff) in totals.items():
                    add((name, "all its depthwise layers", str(sum(n for _, n in layers)), "", pass_name,
                         *(f"{m:.1f}" for m in medians), f"{diff:+.1f}"))
                if args.markdown:
                    _write_model_table(args, device, header, rows)
    finally:
        customops.backends.set("depthwise_conv2d", before)
    print()
    print(columns([header] + rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.host", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--markdown")
    p.add_argument("--model", help="comma-separated zoo (or timm) models: time their depthwise layers (CUDA)")
    p.add_argument("--batch", type=int, default=128, help="--model: the layers' batch")
    p.add_argument("--size", type=int, default=224, help="--model: the images' size that sets the layers' planes")
    p.add_argument("--windows", type=int, default=12, help="--model: windows of calls behind a GPU sleep")
    p.add_argument("--per", type=int, default=3, help="--model: calls of each variant per window")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.model:
        return model_main(args)
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
