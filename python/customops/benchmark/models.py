"""python -m customops.benchmark.models: real models, original against customops.convert's, in one run.

    python -m customops.benchmark.models [--device cuda|cpu] [--models mobilenet_v2,convnext_tiny,...]
        [--configs float32-nchw,...] [--batch-scale F | --quick] [--repeats N] [--no-compile]
        [--markdown F.md] [--plot F.png]

For each model and configuration ({float32, autocast bfloat16} x {NCHW, channels_last} for the image models)
it converts the model (customops.convert: depthwise nn.Conv2d -> customops.DepthwiseConv2d, ...; the blocks of
benchmark/blocks.py are built both ways), checks the converted model's outputs and gradients against the
original's, eager and under torch.compile, then times a training step (zero_grad + forward + loss + backward;
no optimizer) of both eager, replayed as a CUDA graph and torch.compile'd, and an eager inference step
(eval-mode forward under inference_mode), alternating between original and converted step by step. A failed
check marks its row; the command then exits with 1.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import gc
import platform
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import Tensor, nn

import customops
from customops.convert import Swapped

from . import blocks, replknet
from .report import columns, markdown_table
from .timing import gc_paused, median_ms


def device_name(device: torch.device) -> str:
    # As the op benchmark's (__main__.py), whose module would import the whole op table.
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


@dataclass(frozen=True)
class ModelSpec:
    build: Callable[[int], nn.Module] | None  # (input channels) -> model; the torchvision ones ignore it (3)
    input: tuple[int, ...]  # (channels, size) of the (batch, channels, size, size) input; a block's: its shape
    quick_input: tuple[int, ...]  # for --quick: small, but leaving the last stage more than 1x1 pixels
    batch: dict[str, int]  # device type -> default batch
    goal: float  # the eager training-step ratio converted / original aimed at
    configs: tuple[str, ...] = ("float32-nchw", "float32-channels_last", "bf16-nchw", "bf16-channels_last")
    compiled_goal: dict[str, float] | None = None  # config -> compiled training-step ratio aimed at (default 1)
    block: str | None = None  # a block of benchmark/blocks.py, built both ways instead of converted
    quick_batch: int = 2
    make_input: Callable[..., Tensor] = torch.randn  # (shape, device=) -> input

    def compiled_goal_for(self, config: str) -> float:
        return (self.compiled_goal or {}).get(config, 1.0)


def _torchvision(name: str, prepare: Callable[[nn.Module], None] = lambda model: None) -> Callable[[int], nn.Module]:
    def build(channels: int) -> nn.Module:
        try:
            import torchvision
        except ImportError as e:
            raise RuntimeError(f"{name} needs torchvision (pip install torchvision==0.26.0)") from e
        model = getattr(torchvision.models, name)(weights=None)  # random weights: nothing to download
        prepare(model)
        return model

    return build


def _unit_layer_scale(model: nn.Module) -> None:
    # ConvNeXt scales each block's output by a learnt per-channel factor that starts at 1e-6; so initialised,
    # the blocks (and their depthwise convolutions) would barely touch the output the check compares. Trained
    # networks have factors of order 0.1-1. The work per step is the same either way.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):
                p.fill_(1.0)


def _unit_points(shape, device=None) -> Tensor:
    return torch.rand(shape, device=device)  # the NeRF field's points lie in [0, 1)^3


MODELS = {
    "mobilenet_v2": ModelSpec(_torchvision("mobilenet_v2"), (3, 224), (3, 64), {"cuda": 128, "cpu": 8}, 1.0,
                              compiled_goal={"float32-nchw": 0.95, "bf16-channels_last": 0.97}),
    "convnext_tiny": ModelSpec(_torchvision("convnext_tiny", _unit_layer_scale), (3, 224), (3, 64),
                               {"cuda": 64, "cpu": 4}, 0.85,
                               compiled_goal={"float32-nchw": 0.6, "float32-channels_last": 0.6,
                                              "bf16-channels_last": 0.97}),
    # RepLKNet-31B stage 1: 128 channels at 56x56, 31x31 depthwise kernels (see replknet.py); --quick narrows it.
    "replknet31": ModelSpec(replknet.RepLKStage, (replknet.CHANNELS, replknet.RESOLUTION), (32, 16),
                            {"cuda": 64, "cpu": 4}, 0.5, compiled_goal=dict.fromkeys(
                                ("float32-nchw", "float32-channels_last", "bf16-nchw", "bf16-channels_last"), 0.25)),
    # Blocks (benchmark/blocks.py): one op each, the original written in plain PyTorch.
    "clip_mlp": ModelSpec(None, (197, 768), (16, 768), {"cuda": 64, "cpu": 2}, 1.0, ("bf16", "float32"),
                          block="clip_mlp"),
    "swiglu_mlp": ModelSpec(None, (512, 1024), (16, 1024), {"cuda": 32, "cpu": 2}, 1.0, ("bf16", "float32"),
                            block="swiglu_mlp"),
    "decoder": ModelSpec(None, (128, 64, 64), (128, 8, 8), {"cuda": 32, "cpu": 2}, 1.0,
                         ("bf16-channels_last", "float32-channels_last"), block="decoder"),
    "nerf_field": ModelSpec(None, (3,), (3,), {"cuda": 2**20, "cpu": 4096}, 1.0, ("float32",), block="nerf_field",
                            quick_batch=256, make_input=_unit_points),
    "mamba_conv": ModelSpec(None, (2048, 768), (64, 768), {"cuda": 8, "cpu": 1}, 1.0, ("bf16", "float32"),
                            block="mamba_conv"),
}


@dataclass(frozen=True)
class Config:
    autocast: torch.dtype | None  # None: plain float32
    channels_last: bool

    @property
    def memory_format(self) -> torch.memory_format:
        return torch.channels_last if self.channels_last else torch.contiguous_format

    def autocast_context(self, device: torch.device, cache: bool = True) -> contextlib.AbstractContextManager:
        if self.autocast is None:
            return contextlib.nullcontext()
        # CUDA graphs need the cast cache off: a cached cast made during capture would outlive the graph's pool.
        return torch.autocast(device.type, dtype=self.autocast, cache_enabled=cache)


CONFIGS = {
    "float32-nchw": Config(None, False),
    "float32-channels_last": Config(None, True),
    "bf16-nchw": Config(torch.bfloat16, False),
    "bf16-channels_last": Config(torch.bfloat16, True),
    # For blocks whose input is not an image.
    "float32": Config(None, False),
    "bf16": Config(torch.bfloat16, False),
}

# The check compares each model's results with the original's run in float64: the converted model's relative
# error may be at most MARGIN times the original's, plus FLOOR. A direct comparison of the two models fails
# for conversions that merely round differently: in training mode (batch statistics) these randomly
# initialised networks magnify rounding. Measured on CPU with one-ulp noise on 30% of the converted model's
# depthwise outputs and input gradients: mobilenet_v2's depthwise weight gradients then differ by 1e-2 in
# float32 and its outputs by 1e-1 under bf16 autocast, where the original's own errors against float64 are
# 6e-3 and 9e-2. A wrong conversion shows as an error far above the original's (1% noise on one weight of
# the RepLKNet stage: 5e-4 against 1e-7 on the eval output).
MARGIN = 3.0
FLOOR = {None: 1e-5, torch.bfloat16: 1e-2}

# Layers that draw random numbers in training mode; they run in eval mode throughout, so that the runs the
# check compares (original, converted, float64 reference, eager and compiled) draw nothing, and so that the
# compiled step that is checked is the one that is timed (a module's training flag is part of its graph).
# They are a sliver of a step's work (mobilenet_v2's classifier dropout, convnext_tiny's stochastic depth).
RANDOM_LAYERS = ("Dropout", "Dropout1d", "Dropout2d", "StochasticDepth")


@dataclass
class Row:
    model: str
    input: str
    config: str
    swapped: int = 0
    train_ms: tuple[float, float] = (float("nan"), float("nan"))  # (original, converted)
    infer_ms: tuple[float, float] = (float("nan"), float("nan"))
    graph_ms: tuple[float, float] = (float("nan"), float("nan"))  # the training step replayed as a CUDA graph
    compiled_ms: tuple[float, float] = (float("nan"), float("nan"))  # the training step of torch.compile'd models
    compile_s: tuple[float, float] = (float("nan"), float("nan"))  # first compiled step (compiling fwd + bwd)
    goal: float = float("nan")
    compiled_goal: float = float("nan")
    peak_gib: float | None = None
    check: str = ""
    ok: bool = False

    @property
    def train_ratio(self) -> float:
        return self.train_ms[1] / self.train_ms[0]

    @property
    def infer_ratio(self) -> float:
        return self.infer_ms[1] / self.infer_ms[0]

    @property
    def graph_ratio(self) -> float:
        return self.graph_ms[1] / self.graph_ms[0]

    @property
    def compiled_ratio(self) -> float:
        return self.compiled_ms[1] / self.compiled_ms[0]

    def cells(self) -> tuple[str, ...]:
        def met(ratio: float, goal: float) -> str:
            return f"<= {goal:g} " + ("met" if ratio <= goal else "missed")

        def ms(values) -> tuple[str, ...]:
            return tuple(f"{v:.2f}" if v == v else "—" for v in values)

        peak = "—" if self.peak_gib is None else f"{self.peak_gib:.1f}"
        compiled_goal = met(self.compiled_ratio, self.compiled_goal) if self.compiled_ratio == self.compiled_ratio else "—"
        compile_s = "—" if self.compile_s[0] != self.compile_s[0] else f"{self.compile_s[0]:.0f} / {self.compile_s[1]:.0f}"
        return (self.model, self.input, self.config, str(self.swapped), f"{self.train_ms[0]:.2f}",
                f"{self.train_ms[1]:.2f}", f"{self.train_ratio:.2f}", met(self.train_ratio, self.goal),
                *ms((*self.graph_ms, self.graph_ratio)), *ms((*self.compiled_ms, self.compiled_ratio)),
                compiled_goal, compile_s, f"{self.infer_ms[0]:.2f}", f"{self.infer_ms[1]:.2f}",
                f"{self.infer_ratio:.2f}", peak, self.check)


HEADER = ("model", "input", "config", "swapped", "train orig ms", "train conv ms", "train conv/orig", "goal",
          "graphed train orig ms", "graphed train conv ms", "graphed conv/orig", "compiled train orig ms",
          "compiled train conv ms", "compiled conv/orig", "compiled goal", "compile s orig / conv",
          "infer orig ms", "infer conv ms", "infer conv/orig", "peak GiB", "check")


def loss_of(output: Tensor) -> Tensor:
    # Squared, so that the gradient reaching the model depends on its output (a plain sum gives a constant);
    # in float32 at least (float64 for the reference).
    return output.to(torch.promote_types(output.dtype, torch.float32)).square().mean()


def train_step(model: nn.Module, x: Tensor, config: Config, autocast_cache: bool = True) -> Callable[[], None]:
    def step() -> None:
        model.zero_grad(set_to_none=True)
        with config.autocast_context(x.device, cache=autocast_cache):
            output = model(x)
        loss_of(output).backward()

    return step


def graphed(step: Callable[[], None], device: torch.device) -> torch.cuda.CUDAGraph:
    """The step captured as a CUDA graph, whose replay runs the step's kernels with no host work between them,
    so that the time is the GPU's alone (the eager step's time also holds the host's, which on a slow host
    sets the pace). Warm-up on a side stream first, as torch.cuda.graph's documentation asks."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


def graphed_train_ms(models: list[nn.Module], x: Tensor, config: Config, warmup: int,
                     repeats: int) -> tuple[float, ...]:
    """Median GPU time of each model's training step replayed as a CUDA graph, interleaved as the eager ones."""
    graphs = [graphed(train_step(m, x, config, autocast_cache=False), x.device) for m in models]
    try:
        return tuple(interleaved_ms([g.replay for g in graphs], x.device, warmup, repeats))
    finally:
        del graphs
        for m in models:
            m.zero_grad(set_to_none=True)  # the gradients live in the graphs' memory pools


def infer_step(model: nn.Module, x: Tensor, config: Config) -> Callable[[], None]:
    def step() -> None:
        with torch.inference_mode(), config.autocast_context(x.device):
            model(x)

    return step


def interleaved_times(steps: list[Callable[[], object]], device: torch.device, warmup: int,
                      repeats: int) -> list[list[float]]:
    """ms of each call of each step, timed one call at a time in ABBA order so that drift hits them alike (the
    garbage collector paused: gc_paused)."""
    for step in steps:
        for _ in range(warmup):
            step()
    times: list[list[float]] = [[] for _ in steps]
    with gc_paused():
        for r in range(repeats):
            order = range(len(steps)) if r % 2 == 0 else reversed(range(len(steps)))
            for i in order:
                times[i].append(median_ms(steps[i], device, warmup=0, repeats=1))
    return times


def interleaved_ms(steps: list[Callable[[], object]], device: torch.device, warmup: int, repeats: int) -> list[float]:
    """Median ms of each step (interleaved_times)."""
    return [statistics.median(t) for t in interleaved_times(steps, device, warmup, repeats)]


def relative_difference(value: Tensor, reference: Tensor) -> float:
    value, reference = value.detach().double(), reference.detach().double()
    scale = reference.norm()
    diff = (value - reference).norm()
    return float(diff / scale) if scale > 0 else float(diff)


@contextlib.contextmanager
def full_float32() -> Iterator[None]:
    """TF32 off for cuDNN and cuBLAS, so that the float32 check compares float32 arithmetic."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def train_mode(model: nn.Module) -> nn.Module:
    """Training mode, but for the layers that draw random numbers (RANDOM_LAYERS)."""
    model.train()
    for module in model.modules():
        if type(module).__name__ in RANDOM_LAYERS:
            module.eval()
    return model


def check_step(model: nn.Module, x: Tensor, config: Config, weights: list[str],
               compiled: bool = False) -> dict[str, Tensor]:
    """What the check compares: the eval-mode output, then, in training mode, the output, the input gradient,
    the gradients of `weights` and all parameter gradients as one vector. A compiled model runs the timed
    step alone (training mode, an input without gradient), so that checking compiles nothing that is not
    timed."""
    result: dict[str, Tensor] = {}
    if not compiled:
        model.eval()
        with torch.no_grad(), config.autocast_context(x.device):
            result["eval output"] = model(x)
    train_mode(model)
    model.zero_grad(set_to_none=True)
    xg = x if compiled else x.detach().clone().requires_grad_()
    with config.autocast_context(x.device):
        output = model(xg)
    loss_of(output).backward()
    result["train output"] = output.detach()
    if not compiled:
        result["input grad"] = xg.grad
    module = getattr(model, "_orig_mod", model)  # a torch.compile'd model's parameters under their own names
    grads = {name: p.grad for name, p in module.named_parameters() if p.grad is not None}
    result |= {f"grad {name}": grads[name] for name in weights}
    result["all param grads"] = torch.cat([g.flatten().double() for _, g in sorted(grads.items())])
    model.zero_grad(set_to_none=True)
    return result


def swapped_weights(model: nn.Module, swapped: list[str]) -> list[str]:
    """The weights of the swapped modules that have one (a resize or an activation has none)."""
    params = dict(model.named_parameters())
    return [f"{name}.weight" for name in swapped if f"{name}.weight" in params]


def float64_reference(original: nn.Module, x: Tensor, config: Config, weights: list[str]) -> dict[str, Tensor]:
    """check_step of the original model in float64 (no autocast, TF32 off)."""
    reference_model = copy.deepcopy(original).double()
    with full_float32():
        return check_step(reference_model, x.double(), Config(None, config.channels_last), weights)


def compare(reference: dict[str, Tensor], ours: dict[str, Tensor], theirs: dict[str, Tensor],
            config: Config) -> tuple[str, bool]:
    """The converted model's results (`theirs`) against the original's (`ours`), each against the float64
    reference (see MARGIN): the row's text and the verdict."""
    if ours.keys() != theirs.keys():
        raise RuntimeError(f"the converted model's parameters differ: {sorted(ours.keys() ^ theirs.keys())[:5]}")
    floor = FLOOR[config.autocast]
    failed, worst, worst_share = [], "", -1.0
    for key in ours:
        ref = reference[key]
        e_orig, e_conv = relative_difference(ours[key], ref), relative_difference(theirs[key], ref)
        bound = MARGIN * e_orig + floor
        text = f"{key}: {e_conv:.1e}, orig {e_orig:.1e}"
        if not e_conv <= bound:  # NaN fails too
            failed.append(text)
        elif e_conv / bound > worst_share:
            worst, worst_share = text, e_conv / bound
    if failed:
        return f"FAIL {failed[0]}" + (f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""), False
    return f"ok ({worst})", True


def check(original: nn.Module, converted: nn.Module, swapped: list[str], x: Tensor, config: Config) -> tuple[str, bool]:
    """Checks the converted model against the original (see MARGIN); returns the row's text and the verdict.

    Parameters are paired by name (convert keeps the module tree's names); single gradients are compared
    for the swapped modules' weights, whose gradients customops computes.
    """
    weights = swapped_weights(original, swapped)
    reference = float64_reference(original, x, config, weights)
    with full_float32():
        ours = check_step(original, x, config, weights)
        theirs = check_step(converted, x, config, weights)
    return compare(reference, ours, theirs, config)


def compiled_check(original: nn.Module, converted: nn.Module, compiled: tuple[nn.Module, nn.Module],
                   swapped: list[str], x: Tensor, config: Config) -> tuple[str, bool, tuple[float, float]]:
    """The check of the two torch.compile'd models (their timed training step), and the seconds each first
    step took: compiling its forward and backward graphs, and running them once."""
    weights = swapped_weights(original, swapped)
    reference = float64_reference(original, x, config, weights)
    results, seconds = [], []
    with full_float32():
        for model in compiled:
            start = time.perf_counter()
            results.append(check_step(model, x, config, weights, compiled=True))
            if x.device.type == "cuda":
                torch.cuda.synchronize(x.device)
            seconds.append(time.perf_counter() - start)
    text, ok = compare(reference, *results, config)
    return text, ok, tuple(seconds)


def swapped_summary(report: customops.ConversionReport) -> str:
    """'17 Conv2d -> DepthwiseConv2d, ...': the swaps counted by kind."""
    kinds: dict[str, int] = {}
    for _, old, new in report.swapped:  # old, new: class names
        kinds[f"{old} -> {new}"] = kinds.get(f"{old} -> {new}", 0) + 1
    return ", ".join(f"{n} {k}" for k, n in kinds.items()) or "nothing"


def input_shape(spec: ModelSpec, device: torch.device, quick: bool, batch_scale: float = 1.0) -> tuple[int, ...]:
    """The input a model is benchmarked on: (batch, channels, size, size) for an image model, (batch, *shape)
    for a block."""
    batch = spec.quick_batch if quick else max(1, round(spec.batch[device.type] * batch_scale))
    if spec.block is not None:
        return (batch, *(spec.quick_input if quick else spec.input))
    channels, size = spec.quick_input if quick else spec.input
    return (batch, channels, size, size)


def build_pristine(spec: ModelSpec, shape: tuple[int, ...]) -> nn.Module | tuple[nn.Module, nn.Module, str]:
    """What model_pair starts from: the model to convert, or a block's two versions and what was replaced."""
    return blocks.pair(spec.block) if spec.block is not None else spec.build(shape[1])


def model_pair(pristine, config: Config, shape: tuple[int, ...], device: torch.device,
               spec: ModelSpec | None = None) -> tuple[nn.Module, nn.Module, customops.ConversionReport, Tensor]:
    """A copy of `pristine` on `device` in the configuration's memory format, its customops.convert'ed copy (a
    block's customops version), the conversion's report and a random input of `shape` in that format; both
    models in training mode with their random layers off (RANDOM_LAYERS)."""
    if isinstance(pristine, tuple):  # a block: both versions built, nothing for convert to find
        block_original, block_ours, replaced = pristine
        original = copy.deepcopy(block_original).to(device, memory_format=config.memory_format)
        converted = copy.deepcopy(block_ours).to(device, memory_format=config.memory_format)
        report = customops.ConversionReport()
        report.swapped.append(Swapped(*replaced.split(" ")))
    else:
        original = copy.deepcopy(pristine).to(device, memory_format=config.memory_format)
        converted, report = customops.convert(original, inplace=False, return_report=True)
        converted = converted.to(memory_format=config.memory_format)
    torch.manual_seed(2)
    make_input = spec.make_input if spec is not None else torch.randn
    x = make_input(shape, device=device)
    if x.dim() == 4:
        x = x.contiguous(memory_format=config.memory_format)
    return train_mode(original), train_mode(converted), report, x


def run_config(name: str, spec: ModelSpec, pristine, config_name: str, shape: tuple[int, ...],
               device: torch.device, warmup: int, repeats: int, compiled: bool = True) -> tuple[Row, str]:
    config = CONFIGS[config_name]
    row = Row(name, "x".join(map(str, shape)), config_name, goal=spec.goal,
              compiled_goal=spec.compiled_goal_for(config_name))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    original, converted, report, x = model_pair(pristine, config, shape, device, spec)
    row.swapped = len(report)
    swapped = [name for name, _, _ in report.swapped]

    row.check, row.ok = check(original, converted, swapped, x, config)
    if row.swapped == 0:
        row.check, row.ok = "FAIL nothing swapped; " + row.check, False

    train_mode(original), train_mode(converted)
    row.train_ms = tuple(interleaved_ms([train_step(original, x, config), train_step(converted, x, config)],
                                        device, warmup, repeats))
    if device.type == "cuda":
        try:
            row.graph_ms = graphed_train_ms([original, converted], x, config, warmup, repeats)
        except Exception:  # noqa: BLE001  (an uncapturable step leaves the columns empty, not the row)
            traceback.print_exc()
    if compiled:
        compiled_ms(row, original, converted, swapped, x, config, warmup, repeats)
    original.eval(), converted.eval()
    row.infer_ms = tuple(interleaved_ms([infer_step(original, x, config), infer_step(converted, x, config)],
                                        device, warmup, repeats))
    if device.type == "cuda":
        row.peak_gib = torch.cuda.max_memory_allocated(device) / 2**30
    return row, swapped_summary(report)


def compiled_ms(row: Row, original: nn.Module, converted: nn.Module, swapped: list[str], x: Tensor,
                config: Config, warmup: int, repeats: int) -> None:
    """Fills the row's compiled columns: both models torch.compile'd (default mode), compiled cold (Inductor's
    caches off, so the compile times compare and no graph of another run is reused), checked, then timed."""
    torch._dynamo.reset()
    with torch._inductor.config.patch(force_disable_caches=True):
        models = (torch.compile(original), torch.compile(converted))
        text, ok, row.compile_s = compiled_check(original, converted, models, swapped, x, config)
        row.compiled_ms = tuple(interleaved_ms([train_step(m, x, config) for m in models], x.device, warmup,
                                               repeats))
    if not ok:
        row.check, row.ok = f"{row.check}; compiled: {text}", False
    else:
        row.check = f"{row.check}; compiled {text}"
    for model in (original, converted):
        model.zero_grad(set_to_none=True)
    torch._dynamo.reset()


def error_row(name: str, shape: tuple[int, ...], config_name: str, spec: ModelSpec, e: Exception) -> Row:
    message = str(e).splitlines()[0] if str(e) else ""
    return Row(name, "x".join(map(str, shape)), config_name, goal=spec.goal,
               check=f"ERROR {type(e).__name__}: {message}"[:200])


def markdown(rows: list[Row], preamble: str) -> str:
    return markdown_table(preamble, HEADER, [r.cells() for r in rows])


def plot(rows: list[Row], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [f"{r.model}\n{r.config}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(rows)), 4.5))
    width = 0.27
    xs = range(len(rows))
    ax.bar([i - width for i in xs], [r.train_ratio for r in rows], width, label="training step, eager")
    ax.bar(list(xs), [r.graph_ratio for r in rows], width, label="training step, CUDA graph")
    ax.bar([i + width for i in xs], [r.compiled_ratio for r in rows], width, label="training step, torch.compile")
    ax.scatter([i + width for i in xs], [r.compiled_goal for r in rows], marker="_", s=200, color="black",
               zorder=3, label="goal (compiled)")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(list(xs), cases, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("converted / original time")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _names(text: str, known: dict, what: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.models", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="cuda (the default where there is one) or cpu (a sanity check, small batches)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated, of: " + ", ".join(MODELS))
    p.add_argument("--configs", help="comma-separated, of: " + ", ".join(CONFIGS) + " (default: each model's own; "
                   "a model runs those of the list it has)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--batch-scale", type=float, default=1.0, help="multiply every model's default batch")
    size.add_argument("--quick", action="store_true",
                      help="batch 2 at a small resolution, few repeats (a smoke test, not a measurement)")
    p.add_argument("--repeats", type=int,
                   help="timed steps per model and phase (default 20 on CUDA, 5 on CPU, 2 with --quick)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default 3, 1 with --quick)")
    p.add_argument("--no-compile", action="store_true", help="leave out the torch.compile'd training steps")
    p.add_argument("--decompose", action="append", default=[], metavar="OP",
                   help="decompose OP in compiled graphs (customops.inductor.set_decomposed); repeatable")
    p.add_argument("--keep", action="append", default=[], metavar="OP", help="keep OP whole in compiled graphs")
    p.add_argument("--markdown", help="write the table as Markdown to this file")
    p.add_argument("--plot", help="write a PNG bar plot of the ratios to this file")
    args = p.parse_args(argv)

    device = torch.device(args.device)
    models = _names(args.models, MODELS, "model")
    configs = _names(args.configs, CONFIGS, "config") if args.configs else None
    repeats = args.repeats or (2 if args.quick else 20 if device.type == "cuda" else 5)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    for op in args.decompose:
        customops.inductor.set_decomposed(op, True)
    for op in args.keep:
        customops.inductor.set_decomposed(op, False)
    try:
        import torchvision
        tv_version = torchvision.__version__
    except ImportError:
        tv_version = "not installed"
    title = f"{device_name(device)}, torch {torch.__version__}, torchvision {tv_version}"
    print(f"device: {title}; cuDNN TF32 {torch.backends.cudnn.allow_tf32}, "
          f"matmul TF32 {torch.backends.cuda.matmul.allow_tf32}, cudnn.benchmark {torch.backends.cudnn.benchmark}",
          flush=True)

    rows: list[Row] = []
    swaps: dict[str, str] = {}
    for name in models:
        spec = MODELS[name]
        shape = input_shape(spec, device, args.quick, args.batch_scale)
        model_configs = [c for c in spec.configs if configs is None or c in configs]
        torch.manual_seed(0)
        try:
            pristine = build_pristine(spec, shape)
        except Exception as e:  # noqa: BLE001  (torchvision missing: the other models still run)
            traceback.print_exc()
            rows += [error_row(name, shape, c, spec, e) for c in model_configs]
            continue
        for config_name in model_configs:
            try:
                row, swaps[name] = run_config(name, spec, pristine, config_name, shape, device, warmup, repeats,
                                              compiled=not args.no_compile)
            except Exception as e:  # noqa: BLE001  (one broken configuration must not hide the others)
                traceback.print_exc()
                row = error_row(name, shape, config_name, spec, e)
            rows.append(row)
            print(columns([HEADER, row.cells()]).splitlines()[1], flush=True)
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
        print(f"{name}: customops.convert swapped {swaps.get(name, 'unknown (failed)')}", flush=True)

    print()
    print(columns([HEADER] + [r.cells() for r in rows]))
    command = "python -m customops.benchmark.models " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.markdown:
        now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        swapped = "; ".join(f"{m}: {s}" for m, s in swaps.items())
        decomposed = ", ".join(f"{op} {'decomposed' if on else 'kept whole'}"
                               for op, on in customops.inductor.decomposed().items())
        preamble = (
            f"Measured on {title}, customops {customops.__version__}, {now}.\n\n"
            f"Command: `{command}`.\n\n"
            f"Each row: the model, and its copy converted by `customops.convert` (swapped: {swapped}), "
            f"with the same weights; the blocks ({', '.join(blocks.BLOCKS)}) are built both ways, the original "
            "written in plain PyTorch as such models are. A training step is `zero_grad(set_to_none=True)`, "
            "forward, loss (mean of the squared output, in float32) and backward, no optimizer; an inference "
            "step is an eval-mode forward under `torch.inference_mode()`. Dropout and stochastic depth are off "
            "(eval mode) throughout, so that the compiled step that is checked is the one that is timed. bf16: "
            "`torch.autocast(dtype=torch.bfloat16)` around the forward; channels_last: model and input in "
            "`torch.channels_last`. "
            f"Times are medians of {repeats} steps after {warmup} warm-up step(s), original and converted "
            "alternating step by step (CUDA events on GPU, wall clock on CPU), with PyTorch's defaults "
            f"(cuDNN TF32 {torch.backends.cudnn.allow_tf32}, cudnn.benchmark {torch.backends.cudnn.benchmark}); "
            "graphed: the same training step captured once as a CUDA graph (autocast's cast cache off, as graphs "
            "need) and replayed, timed the same way: the GPU's time alone, with no host work between kernels "
            "(on a host slower than its GPU the eager step's time is the host's). "
            "compiled: both models `torch.compile`d (default mode; Inductor's caches off, so that each compiles "
            f"cold; customops.inductor: {decomposed}), timed the same way; compile s: the first compiled step "
            "of each, compiling its forward and backward graphs. "
            "conv/orig below 1 means the converted model is faster; goal and compiled goal: the ratios aimed "
            "at. peak GiB: the most memory allocated on the GPU while the row ran; "
            "peak GiB includes the check's float64 copy of the original. "
            "Check (before timing, TF32 off): the eval-mode output, and in training mode (batch statistics) "
            "the output, the input gradient, each swapped module's weight gradient and all parameter gradients "
            "as one vector, of the original and the converted model in the row's configuration and of the "
            "original in float64; for each, the converted model's relative error "
            f"||converted - float64|| / ||float64|| must stay under {MARGIN:g} x the original's + "
            f"{FLOOR[None]:.0e} (float32) or + {FLOOR[torch.bfloat16]:.0e} (bf16); the compiled models likewise "
            "(their timed step: training-mode output and parameter gradients). The cell gives the errors of "
            "the quantity closest to its bound (of the first failing one, on failure).")
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, preamble))
    if args.plot:
        plot(rows, args.plot, title)
    return exit_code(rows)


def exit_code(rows: list) -> int:
    """1, with a line on stderr, where a row failed its check."""
    failed = [r for r in rows if not r.ok]
    if failed:
        print(f"{len(failed)} of {len(rows)} rows failed their check", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
