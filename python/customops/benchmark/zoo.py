"""python -m customops.benchmark.zoo: timm models, original against customops.convert's, in one run.

    python -m customops.benchmark.zoo [--models efficientnet_b0,...|any timm model] [--configs bf16-channels_last,float32-nchw]
        [--batch N] [--repeats N] [--timings eager,graphed,compiled,reduce-overhead] [--no-compile] [--check-only]
        [--quick] [--cudnn-benchmark] [--markdown F.md] [--plot F.png]
    python -m customops.benchmark.zoo --replot F.md --plot F.png

The zoo: models of the timm families people train with depthwise convolutions (EfficientNet, MobileNet v3/v4,
ConvNeXt v2, InceptionNeXt, MixNet, LCNet, EdgeNeXt, MobileViT v2, GhostNet, EfficientViT, TinyNet) and one
segmentation-style model with bilinear resizes (a timm MobileNet v3 backbone under a feature-pyramid decoder),
random weights (pip install 'customops[benchmark]': timm). For each model and configuration it converts the
model (customops.convert), checks the converted model's outputs and gradients against the original's (the
check of customops.benchmark.models, before timing), then times a training step (zero_grad + forward + loss +
backward) of both: eager (wall clock: the host's time counts), replayed as a CUDA graph (the GPU's time alone),
torch.compile'd, and (--timings) compiled with mode="reduce-overhead", in interleaved rounds; converted /
original is the median of the rounds' ratios with the spread of the middle half. Per step it also gives the GPU
kernel time and the number of kernels launched (one profiled eager step; the kernel time of a compiled one too)
and the host's time to issue its forward and its backward, eager and compiled, each phase behind a GPU sleep
(host_phases). --check-only runs the check alone (the CPU test does, on small inputs). --replot plots the ratios
of a table an earlier run wrote: a run cut short writes its table row by row, its plot only at the end. The
depthwise layers' passes, one by one: python -m customops.benchmark.depthwise_choice.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import math
import os
import re
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor, nn

import customops

from . import models as bench
from .report import columns, markdown_table
from .timing import GpuSleep, gc_paused

# timm names: EfficientNet, MobileNet v3/v4, ConvNeXt v2, InceptionNeXt and others of the same kind.
TIMM_MODELS = (
    "efficientnet_b0", "mobilenetv3_large_100", "mobilenetv4_conv_small", "convnextv2_atto", "inception_next_atto",
    "mixnet_s", "tf_efficientnet_lite0", "lcnet_100", "edgenext_xx_small", "mobilevitv2_050", "ghostnet_100",
    "efficientvit_b0", "repghostnet_100", "tinynet_a",
)
SEGMENTATION = "fpn_mobilenetv3"  # timm backbone + feature-pyramid decoder with bilinear nn.Upsample layers
ZOO = (*TIMM_MODELS, SEGMENTATION)
CONFIGS = ("bf16-channels_last", "float32-nchw")
TIMINGS = ("eager", "graphed", "compiled", "reduce-overhead")
DEFAULT_TIMINGS = ("eager", "graphed", "compiled")


def _timm():
    try:
        import timm
    except ImportError as e:
        raise RuntimeError("the model zoo needs timm: pip install 'customops[benchmark]'") from e
    return timm


class FeaturePyramidSegmenter(nn.Module):
    """A segmentation-style model: a timm backbone's features at strides 4-32, merged top-down (1x1 lateral
    convolutions, 2x bilinear upsampling), a 3x3 head, and a 4x bilinear upsampling to the input's size."""

    def __init__(self, backbone: str = "mobilenetv3_large_100", width: int = 64, classes: int = 21) -> None:
        super().__init__()
        self.backbone = _timm().create_model(backbone, pretrained=False, features_only=True, out_indices=(1, 2, 3, 4))
        self.lateral = nn.ModuleList(nn.Conv2d(c, width, 1) for c in self.backbone.feature_info.channels())
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.head = nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(inplace=True), nn.Conv2d(width, classes, 1))
        self.out = nn.Upsample(scale_factor=4, mode="bilinear", align_corners=False)

    def forward(self, x: Tensor) -> Tensor:
        features = self.backbone(x)
        merged = self.lateral[-1](features[-1])
        for lateral, feature in zip(reversed(self.lateral[:-1]), reversed(features[:-1])):
            merged = self.up(merged) + lateral(feature)
        return self.out(self.head(merged))


def build(name: str) -> nn.Module:
    torch.manual_seed(0)
    if name == SEGMENTATION:
        return FeaturePyramidSegmenter()
    return _timm().create_model(name, pretrained=False)


def model_names(text: str) -> list[str]:
    """The zoo's models and any other timm model by name (to try the conversion on models the zoo lacks)."""
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in ZOO and not _timm().is_model(n)]
    if unknown:
        raise SystemExit(f"unknown model: {', '.join(unknown)} (the zoo's: {', '.join(ZOO)}, or any timm model)")
    return names


def depthwise_layers(model: nn.Module, x: Tensor) -> list[tuple]:
    """(channels, height, width, kernel, stride, padding, dilation, bias) of each depthwise nn.Conv2d a forward
    of `x` runs, in order (a layer run twice counts twice)."""
    seen: list[tuple] = []

    def hook(module, args):
        h, w = args[0].shape[-2:]
        seen.append((module.in_channels, h, w, module.kernel_size, module.stride, module.padding, module.dilation,
                     module.bias is not None))

    handles = [m.register_forward_pre_hook(hook) for m in model.modules()
               if isinstance(m, nn.Conv2d) and m.groups == m.in_channels == m.out_channels and m.groups > 1]
    try:
        with torch.no_grad():
            model.eval()(x)
    finally:
        for h in handles:
            h.remove()
    return seen


@dataclass
class Spread:
    ratio: float = math.nan  # median of the rounds' converted / original
    low: float = math.nan  # the middle half of the rounds' ratios
    high: float = math.nan
    ms: tuple[float, float] = (math.nan, math.nan)  # median ms, original and converted

    @classmethod
    def of(cls, ratios: list[float], ms: tuple[float, float] = (math.nan, math.nan)) -> "Spread":
        """The median and middle half of rounds' ratios (none: the empty spread)."""
        if not ratios:
            return cls()
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        return cls(statistics.median(ratios), q[0], q[2], ms)

    def cell(self) -> str:
        return "—" if self.ratio != self.ratio else f"{self.ratio:.3f} ({self.low:.2f}-{self.high:.2f})"

    @classmethod
    def parse(cls, cell: str) -> "Spread":
        """The spread a cell() wrote, at the cell's precision (not timed, "—": the empty spread)."""
        m = re.fullmatch(r"([\d.]+) \(([\d.]+)-([\d.]+)\)", cell)
        return cls(*(float(v) for v in m.groups())) if m else cls()


@dataclass
class Phases:
    """The host's ms to issue a step's forward (with its loss) and its backward (host_phases)."""
    forward: float = math.nan
    backward: float = math.nan
    caught_up: int = 0  # phases the GPU caught up with, left out

    def cell(self) -> str:
        return "—" if self.forward != self.forward else f"{self.forward:.1f}+{self.backward:.1f}"


def _phase_pair(pair: tuple[Phases, Phases]) -> str:
    if all(p.forward != p.forward for p in pair):
        return "—"
    caught_up = sum(p.caught_up for p in pair)
    return " / ".join(p.cell() for p in pair) + (f" ({caught_up} caught up)" if caught_up else "")


def _ratio_pair(pair: tuple[Spread, Spread]) -> str:
    return "—" if all(s.ratio != s.ratio for s in pair) else "; ".join(s.cell() for s in pair)


@dataclass
class ZooRow:
    model: str
    config: str
    batch: int
    swapped: str = ""
    eager: Spread = field(default_factory=Spread)
    graphed: Spread = field(default_factory=Spread)
    compiled: Spread = field(default_factory=Spread)
    reduce_overhead: Spread = field(default_factory=Spread)  # torch.compile(mode="reduce-overhead")
    kernel_ms: tuple[float, float] = (math.nan, math.nan)  # GPU kernel time of one eager step
    compiled_kernel_ms: tuple[float, float] = (math.nan, math.nan)  # the same of the compiled (default mode) step
    launches: tuple[int, int] = (0, 0)  # kernels launched by one eager step
    host: tuple[Phases, Phases] = (Phases(), Phases())  # the host's time to issue an eager step, orig / conv
    compiled_host: tuple[Phases, Phases] = (Phases(), Phases())  # the same of the compiled (default mode) step
    # converted / original host time within each window, forward and backward (host_phases), eager and compiled
    host_ratio: tuple[Spread, Spread] = (Spread(), Spread())
    compiled_host_ratio: tuple[Spread, Spread] = (Spread(), Spread())
    check: str = ""
    ok: bool = False

    def cells(self) -> tuple[str, ...]:
        def pair(v, fmt="{:.2f}"):
            return "—" if v[0] != v[0] or (isinstance(v[0], int) and v[0] == 0) else " / ".join(fmt.format(x) for x in v)

        return (self.model, self.config, str(self.batch), self.swapped, self.eager.cell(), self.graphed.cell(),
                self.compiled.cell(), self.reduce_overhead.cell(), pair(self.eager.ms), pair(self.kernel_ms),
                pair(self.launches, "{}"), pair(self.compiled_kernel_ms), _phase_pair(self.host),
                _ratio_pair(self.host_ratio),
                _phase_pair(self.compiled_host), _ratio_pair(self.compiled_host_ratio), self.check)


HEADER = ("model", "config", "batch", "swapped", "eager conv/orig", "graphed conv/orig", "compiled conv/orig",
          "reduce-overhead conv/orig",
          "eager ms orig / conv", "kernel ms orig / conv", "launches orig / conv", "compiled kernel ms orig / conv",
          "host ms fwd+bwd orig / conv", "host conv/orig fwd; bwd", "compiled host ms fwd+bwd orig / conv",
          "compiled host conv/orig fwd; bwd", "check")


def interleaved(steps: list[Callable[[], object]], device: torch.device, warmup: int, repeats: int) -> Spread:
    times = bench.interleaved_times(steps, device, warmup, repeats)
    return Spread.of([c / o for o, c in zip(*times)], tuple(statistics.median(t) for t in times))


def kernel_profile(step: Callable[[], None], device: torch.device) -> tuple[float, int]:
    """GPU kernel time (ms) and kernel count of one call of step."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize(device)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith(("Memcpy", "Memset"))]
    return sum(e.time_range.elapsed_us() for e in kernels) / 1e3, len(kernels)


def host_phases(models: list[nn.Module], x: Tensor, config, device: torch.device,
                windows: int) -> tuple[tuple[Phases, ...], tuple[Spread, Spread]]:
    """The host's time to issue each model's forward (with the loss) and its backward, each phase queued behind a
    GPU sleep so that the host never waits for the GPU: one phase stays under the launch queue's depth, which a
    whole step of a thousand launches may not. The models take turns window by window; a phase whose sleep was
    over when it finished issuing (the GPU caught up) is counted and left out. A phase of more than about a thousand
    launches fills CUDA's launch queue too: CUDA_SCALE_LAUNCH_QUEUES=4x in the environment deepens it (the table
    records the setting; the benchmark leaves it as the user has it, as it changes every timing). The garbage
    collector is paused while the windows run (gc_paused). On the CPU: each phase's wall clock. Returns each
    model's medians and, forward and backward, the spread of the last model's time over the first's within each
    window where neither was caught up: paired in time, a host that drifts between windows moves both alike."""
    cuda = device.type == "cuda"
    sleep = GpuSleep(device) if cuda else None

    def issued(work: Callable[[], object], sleep_ms: float) -> tuple[object, float, bool]:
        """work() issued behind a sleep: its result, the host's ms, and whether the GPU caught up."""
        if cuda:
            torch.cuda.synchronize(device)
        asleep = sleep(sleep_ms) if cuda else None
        start = time.perf_counter()
        result = work()
        ms = (time.perf_counter() - start) * 1e3
        return result, ms, cuda and asleep.query()

    def forward(model: nn.Module) -> Tensor:
        with config.autocast_context(device):
            output = model(x)
        return bench.loss_of(output)

    def phases(model: nn.Module, sleep_ms: float) -> list[tuple[float, bool]]:
        """(ms, caught up) of the model's forward and of its backward."""
        model.zero_grad(set_to_none=True)
        loss, forward_ms, forward_caught_up = issued(lambda: forward(model), sleep_ms)
        _, backward_ms, backward_caught_up = issued(loss.backward, sleep_ms)
        if cuda:
            torch.cuda.synchronize(device)
        return [(forward_ms, forward_caught_up), (backward_ms, backward_caught_up)]

    # The sleep: four times the longest phase issued without one (the GPU's time included: an upper bound).
    sleep_ms = 20.0
    for model in models:
        for _ in range(2):
            sleep_ms = max(sleep_ms, 4 * max(ms for ms, _ in phases(model, 1.0)))
    # taken[window][model][phase]: (ms, caught up)
    taken: list[list[list[tuple[float, bool]]]] = []
    with gc_paused():
        for window in range(windows):
            turns: list[list[tuple[float, bool]]] = [[] for _ in models]
            for i in (range(len(models)) if window % 2 == 0 else reversed(range(len(models)))):
                turns[i] = phases(models[i], sleep_ms)
            taken.append(turns)
    for model in models:
        model.zero_grad(set_to_none=True)

    def median(times: list[float]) -> float:
        return statistics.median(times) if times else math.nan

    def kept(i: int, phase: int) -> list[float]:
        return [w[i][phase][0] for w in taken if not w[i][phase][1]]

    medians = tuple(Phases(median(kept(i, 0)), median(kept(i, 1)),
                           sum(caught for w in taken for _, caught in w[i])) for i in range(len(models)))
    ratios = tuple(Spread.of([w[-1][phase][0] / w[0][phase][0] for w in taken
                              if not (w[-1][phase][1] or w[0][phase][1])]) for phase in (0, 1))
    return medians, ratios


def run(name: str, config_name: str, device: torch.device, batch: int, size: int, warmup: int, repeats: int,
        timings: tuple[str, ...] = TIMINGS, check_only: bool = False) -> ZooRow:
    config = bench.CONFIGS[config_name]
    row = ZooRow(name, config_name, batch)
    pristine = build(name)
    original, converted, report, x = bench.model_pair(pristine, config, (batch, 3, size, size), device)
    swapped = [n for n, _, _ in report.swapped]
    row.swapped = bench.swapped_summary(report)
    row.check, row.ok = bench.check(original, converted, swapped, x, config)
    if not swapped:
        row.check, row.ok = "FAIL nothing swapped; " + row.check, False
    if check_only:
        return row
    steps = [bench.train_step(m, x, config) for m in (original, converted)]
    if "eager" in timings:
        row.eager = interleaved(steps, device, warmup, repeats)
        row.host, row.host_ratio = host_phases([original, converted], x, config, device, repeats)
    if device.type == "cuda" and "eager" in timings:
        profiled = [kernel_profile(s, device) for s in steps]
        row.kernel_ms = (profiled[0][0], profiled[1][0])
        row.launches = (profiled[0][1], profiled[1][1])
    if device.type == "cuda" and "graphed" in timings:
        try:
            graphs = [bench.graphed(bench.train_step(m, x, config, autocast_cache=False), device)
                      for m in (original, converted)]
            row.graphed = interleaved([g.replay for g in graphs], device, warmup, repeats)
            del graphs
        except RuntimeError as e:  # the original model too: e.g. a host-to-device copy in its forward
            row.check += f"; not capturable as a CUDA graph ({str(e).splitlines()[0][:60]}...)"
            torch.cuda.synchronize(device)
        for m in (original, converted):
            m.zero_grad(set_to_none=True)
    for mode in (m for m in ("compiled", "reduce-overhead") if m in timings):
        torch._dynamo.reset()
        options = {"mode": mode} if mode != "compiled" else {}
        models = (torch.compile(original, **options), torch.compile(converted, **options))
        if mode == "compiled":  # the check of the compiled graphs; reduce-overhead replays the same graphs
            text, ok, _ = bench.compiled_check(original, converted, models, swapped, x, config)
            row.check, row.ok = f"{row.check}; compiled {text}", row.ok and ok
        compiled_steps = [bench.train_step(m, x, config) for m in models]
        spread = interleaved(compiled_steps, device, warmup, repeats)
        setattr(row, mode.replace("-", "_"), spread)
        if mode == "compiled":
            row.compiled_host, row.compiled_host_ratio = host_phases(list(models), x, config, device, repeats)
            if device.type == "cuda":
                row.compiled_kernel_ms = tuple(kernel_profile(s, device)[0] for s in compiled_steps)
        torch._dynamo.reset()
    return row


def geomean(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary(rows: list[ZooRow]) -> list[tuple[str, ...]]:
    out = []
    for config in sorted({r.config for r in rows}):
        mine = [r for r in rows if r.config == config]
        means = (geomean([getattr(r, k).ratio for r in mine])
                 for k in ("eager", "graphed", "compiled", "reduce_overhead"))
        out.append((f"geomean {config}", "", "", "", *(f"{m:.3f}" if m == m else "—" for m in means),
                    *[""] * (len(HEADER) - 8)))
    return out


def plot(rows: list[ZooRow], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = sorted({r.config for r in rows})
    fig, axes = plt.subplots(len(configs), 1, figsize=(12, 4 * len(configs)), squeeze=False)
    for ax, config in zip(axes[:, 0], configs):
        mine = [r for r in rows if r.config == config]
        xs = range(len(mine))
        kinds = [k for k in ("eager", "graphed", "compiled", "reduce_overhead")
                 if any(getattr(r, k).ratio == getattr(r, k).ratio for r in mine)]  # the timed ones
        for i, kind in enumerate(kinds):
            spreads = [getattr(r, kind) for r in mine]
            offset = (i - (len(kinds) - 1) / 2) * 0.2
            ax.bar([x + offset for x in xs], [s.ratio for s in spreads], 0.2, label=kind.replace("_", "-"),
                   yerr=[[max(0.0, s.ratio - s.low) if s.ratio == s.ratio else 0 for s in spreads],
                         [max(0.0, s.high - s.ratio) if s.ratio == s.ratio else 0 for s in spreads]], capsize=2)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xticks(list(xs), [r.model for r in mine], fontsize=7, rotation=30, ha="right")
        ax.set_ylabel("converted / original")
        ax.set_title(f"{title}: {config}", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def rows_of_table(text: str) -> tuple[list[ZooRow], str]:
    """The ratio columns of a table this module wrote (a run's --markdown), as rows, and the run's title (device,
    torch and timm), so that a run cut short by a time limit, which writes its table row by row but its plot only at
    the end, can still be plotted (--replot)."""
    title = re.search(r"Measured on (.*?), customops", text)
    rows, names = [], None
    ratio_columns = ("eager conv/orig", "graphed conv/orig", "compiled conv/orig", "reduce-overhead conv/orig")
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == HEADER[0]:  # the table's own header: tables of earlier versions have fewer columns
            names = {name: i for i, name in enumerate(cells)}
            continue
        if names is None or len(cells) != len(names) or cells[0] == "---" or cells[0].startswith("geomean"):
            continue
        rows.append(ZooRow(cells[0], cells[1], int(cells[2]), cells[3],
                           *(Spread.parse(cells[names[c]]) for c in ratio_columns)))
    return rows, title.group(1) if title else ""


def _table(rows: list[ZooRow], check_only: bool) -> list:
    return [r.cells() for r in rows] + ([] if check_only else summary(rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.zoo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default=",".join(ZOO),
                   help="comma-separated: the zoo's (" + ", ".join(ZOO) + ") or any other timm model's names")
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, of: " + ", ".join(CONFIGS))
    p.add_argument("--batch", type=int, help="default 128 on CUDA, 2 on CPU or with --quick")
    p.add_argument("--size", type=int, help="input height and width (default 224, 64 with --quick)")
    p.add_argument("--quick", action="store_true", help="batch 2 at 64x64 (a smoke test, not a measurement)")
    p.add_argument("--repeats", type=int, default=10, help="interleaved rounds per timing (default 10)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--timings", default=",".join(DEFAULT_TIMINGS),
                   help="comma-separated, of: " + ", ".join(TIMINGS) + " (default: " + ",".join(DEFAULT_TIMINGS)
                        + "; reduce-overhead: torch.compile(mode='reduce-overhead'), CUDA graphs of the compiled "
                        "graphs)")
    p.add_argument("--no-compile", action="store_true", help="leave out the torch.compile'd steps")
    p.add_argument("--check-only", action="store_true", help="only check each converted model, time nothing")
    p.add_argument("--markdown", help="write the table as Markdown to this file")
    p.add_argument("--plot", help="write a PNG bar plot of the ratios to this file")
    p.add_argument("--replot", metavar="TABLE.md",
                   help="time nothing: plot (--plot) the ratios of a table an earlier run wrote (--markdown)")
    p.add_argument("--cudnn-benchmark", action="store_true",
                   help="turn torch.backends.cudnn.benchmark on: cuDNN tunes its algorithms per shape, and customops "
                        "times its choice between its kernels and PyTorch's (default: PyTorch's default, off)")
    args = p.parse_args(argv)
    if args.replot:
        if not args.plot:
            p.error("--replot needs --plot, the PNG to write")
        with open(args.replot) as f:
            rows, title = rows_of_table(f.read())
        if not rows:
            p.error(f"--replot: no rows of a zoo table in {args.replot}")
        plot(rows, args.plot, title)
        return 0
    if args.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True

    device = torch.device(args.device)
    names = model_names(args.models)
    timings = tuple(bench._names(args.timings, dict.fromkeys(TIMINGS), "timing"))
    if args.no_compile:
        timings = tuple(t for t in timings if t not in ("compiled", "reduce-overhead"))
    configs = bench._names(args.configs, dict.fromkeys(CONFIGS), "config")
    small = args.quick or device.type == "cpu"
    batch = args.batch or (2 if small else 128)
    size = args.size or (64 if small else 224)
    title = f"{bench.device_name(device)}, torch {torch.__version__}, timm {_timm().__version__}"
    print(f"device: {title}; cudnn.benchmark {torch.backends.cudnn.benchmark}", flush=True)
    command = "python -m customops.benchmark.zoo " + " ".join(sys.argv[1:] if argv is None else argv)

    def write_markdown(rows: list[ZooRow]) -> None:
        now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        preamble = (
            f"Measured on {title}, customops {customops.__version__}, {now}.\n\nCommand: `{command}`.\n\n"
            f"Input {batch}x3x{size}x{size}. A training step: zero_grad, forward, loss (mean of the squared output, "
            "float32), backward, no optimizer; bf16: autocast around the forward. Ratios: converted / original, "
            f"the median of {args.repeats} interleaved rounds' ratios and (in brackets) the middle half of them, after "
            f"{args.warmup} warm-up steps, Python's garbage collector paused while timing; below 1 the converted "
            "model is faster. eager: wall clock per step; graphed: "
            "the step captured as a CUDA graph and replayed (GPU time alone); compiled: torch.compile (default mode); "
            "reduce-overhead: torch.compile(mode='reduce-overhead'). "
            "kernel ms and launches: one profiled eager step (compiled kernel ms: one compiled step); host ms: the "
            "host's time to issue a step's forward (with its loss) + its backward, eager and compiled, each phase "
            f"queued behind a GPU sleep so that the host never waits for the GPU, the median of {args.repeats} "
            "windows (phases the GPU caught up with are counted and left out), and host conv/orig: the converted "
            "model's time over the original's within each window, forward; backward, median and middle half (paired "
            "in time: a host that drifts moves both alike; "
            f"CUDA_SCALE_LAUNCH_QUEUES={os.environ.get('CUDA_SCALE_LAUNCH_QUEUES', 'unset')}). "
            f"cudnn.benchmark {torch.backends.cudnn.benchmark} (customops.backends: "
            f"depthwise_conv2d {customops.backends.get('depthwise_conv2d')}). Check: customops.benchmark.models' "
            "(outputs and gradients against the original's, each against float64).")
        with open(args.markdown, "w") as f:
            f.write(markdown_table(preamble, HEADER, _table(rows, args.check_only)))

    rows: list[ZooRow] = []
    for name in names:
        for config in configs:
            try:
                row = run(name, config, device, batch, size, args.warmup, args.repeats, timings,
                          check_only=args.check_only)
            except Exception as e:  # noqa: BLE001  (one broken model must not hide the others)
                traceback.print_exc()
                row = ZooRow(name, config, batch, check=f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:150]}")
            rows.append(row)
            print(columns([HEADER, row.cells()]).splitlines()[1], flush=True)
            if args.markdown:  # the rows so far: a run cut short by a time limit keeps what it measured
                write_markdown(rows)
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    table = _table(rows, args.check_only)
    print()
    print(columns([HEADER] + table))
    if args.markdown:
        write_markdown(rows)
    if args.plot and not args.check_only:
        plot(rows, args.plot, title)
    return bench.exit_code(rows)


if __name__ == "__main__":
    raise SystemExit(main())
