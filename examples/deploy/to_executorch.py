"""Lower the example networks to ExecuTorch programs (.pte, XNNPACK delegate), check each against eager PyTorch op
by op, and time each program beside the same network of plain torch.nn layers lowered the same way, in
ExecuTorch's runtime on this machine's CPU. Prints a Markdown table (docs/deploy.md has it).

    python examples/deploy/to_executorch.py [--out DIR] [--rounds 30] [--calls 10] [--networks 0,1,2,3,4]

The networks: the segmentation model of train_export.py (trained a few steps) with its resizes asymmetric and
align_corners (its plain twin: nn.Conv2d, QuickGELU written as x * sigmoid(1.702 x), F.interpolate, half_pixel where
PyTorch has no asymmetric mode), torchvision's MobileNetV2 (random weights, 10 classes, 96x96) and a ConvNeXt-style
stack of 7x7 depthwise blocks, each before and after customops.convert, and a SwiGLU MLP with customops.silu_mul and
with F.silu(a) * b. ``--out`` keeps each network's .pte, which examples/executorch_runner.cpp runs.

Needs ``pip install executorch`` (torch 2.15).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

import customops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_export import build, plain_twin  # noqa: E402


def _program(model: nn.Module, args, keep: Path | None = None):
    """The XNNPACK program of `model` (kept at `keep`), loaded: (its bytes, which must outlive it, its method)."""
    from executorch.runtime import Runtime

    from customops.deploy.pte import lower

    buffer = lower(torch.export.export(model, args), "xnnpack").buffer
    if keep is not None:
        keep.write_bytes(buffer)
    program = Runtime.get().load_program(buffer)
    return buffer, program, program.load_method("forward")


def _interleaved_ms(methods, args, rounds: int, calls: int):
    """Each method's time per call (the median over rounds of each round's median) and the median over rounds of
    the first's time over the second's. The methods take turns in every round (in alternating order), so that a
    busy spell of the machine falls on both halves of a round's ratio."""
    inputs = list(args)
    times = [[] for _ in methods]
    for r in range(rounds):
        order = list(enumerate(methods))
        for i, method in order if r % 2 == 0 else order[::-1]:
            for _ in range(3):
                method.execute(inputs)
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                method.execute(inputs)
                samples.append((time.perf_counter() - start) * 1e3)
            times[i].append(statistics.median(samples))
    ratio = statistics.median(a / b for a, b in zip(times[0], times[1]))
    return [statistics.median(t) for t in times], ratio


class _Block(nn.Module):
    """ConvNeXt's block without its norm: a 7x7 depthwise convolution, then a pointwise MLP, residual."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.mlp = nn.Sequential(nn.Conv2d(channels, 4 * channels, 1), nn.GELU(), nn.Conv2d(4 * channels, channels, 1))

    def forward(self, x):
        return x + self.mlp(self.dw(x))


def convnext_style() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 64, 4, stride=4), _Block(64), _Block(64), nn.Conv2d(64, 128, 2, stride=2),
                         _Block(128), _Block(128)).eval()


class _SwiGLU(nn.Module):
    """A transformer's SwiGLU MLP: down(silu(gate(x)) * up(x)), the gate by customops.silu_mul or by its formula."""

    def __init__(self, dim: int, hidden: int, fused: bool) -> None:
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(dim, hidden), nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.fused = fused

    def forward(self, x):
        g, u = self.gate(x), self.up(x)
        return self.down(customops.silu_mul(g, u) if self.fused else nn.functional.silu(g) * u)


def swiglu_mlp(fused: bool) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(_SwiGLU(512, 1408, fused), _SwiGLU(512, 1408, fused)).eval()


def _segmenters():
    segmenter, (images,) = build(25)
    for mode in ("asymmetric", "align_corners"):
        model = copy.deepcopy(segmenter)
        model.up.coordinate_mode = mode
        yield f"segmentation model (train_export.py), {mode} resizes, 4x3x32x32", model.eval(), plain_twin(model), (
            images,)


def _mobilenet():
    import torchvision

    torch.manual_seed(0)
    mobilenet = torchvision.models.mobilenet_v2(num_classes=10).eval()
    yield ("MobileNetV2 (random weights), 1x3x96x96", customops.convert(copy.deepcopy(mobilenet)).eval(), mobilenet,
           (torch.randn(1, 3, 96, 96),))


def _swiglu():
    yield "SwiGLU MLP, 2 blocks (random weights), 64x512 tokens", swiglu_mlp(True), swiglu_mlp(False), (
        torch.randn(64, 512),)


def _convnext():
    plain = convnext_style()
    yield ("ConvNeXt-style 7x7 depthwise blocks (random weights), 1x3x112x112",
           customops.convert(copy.deepcopy(plain)).eval(), plain, (torch.randn(1, 3, 112, 112),))


# Each maker's networks, in the table's order: the segmentation model's two (it trains once for both), MobileNetV2,
# the SwiGLU MLP, the ConvNeXt-style stack.
_MAKERS = ((_segmenters, 2), (_mobilenet, 1), (_swiglu, 1), (_convnext, 1))
COUNT = sum(n for _, n in _MAKERS)


def networks(which=None):
    """(name, customops network, plain torch.nn network, example input) of each network, or of those whose
    indices `which` holds: only their makers run (the segmentation model trains only where one of its two is
    asked for)."""
    first = 0
    for make, n in _MAKERS:
        if which is None or any(first + i in which for i in range(n)):
            for i, network in enumerate(make()):
                if which is None or first + i in which:
                    yield network
        first += n


def _indices(text: str) -> set:
    try:
        indices = {int(i) for i in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated indices, got {text!r}") from None
    if not indices <= set(range(COUNT)):
        raise argparse.ArgumentTypeError(f"indices go from 0 to {COUNT - 1}, got {text!r}")
    return indices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where to keep each network's .pte")
    parser.add_argument("--rounds", type=int, default=30, help="rounds of calls, the two networks taking turns")
    parser.add_argument("--calls", type=int, default=10, help="calls per round")
    parser.add_argument("--networks", type=_indices, help=f"which networks, by index in the table (0-{COUNT - 1}), "
                        "comma-separated; default: all")
    options = parser.parse_args()
    if options.out:
        options.out.mkdir(parents=True, exist_ok=True)
    rows = []
    indices = sorted(options.networks) if options.networks else range(COUNT)
    for i, (name, model, plain, args) in zip(indices, networks(options.networks)):
        report = customops.deploy.check(model, args, runtime="executorch")
        print(report, file=sys.stderr)
        ours = _program(model, args, options.out / f"network{i}.pte" if options.out else None)
        theirs = _program(plain, args)
        (ours_ms, theirs_ms), ratio = _interleaved_ms([ours[2], theirs[2]], args, options.rounds, options.calls)
        scale = max(1.0, float(model(*args).abs().max()))
        rows.append((name, report.max_abs_diff / scale, ours_ms, theirs_ms, ratio))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; per call, the median over {options.rounds} "
          f"rounds of {options.calls} calls, the two programs taking turns; the ratio: the median of the rounds' "
          "ratios")
    print("| network | max diff / output range | customops .pte ms | torch.nn .pte ms | customops / torch.nn |")
    print("| --- | --- | --- | --- | --- |")
    for name, error, ours, theirs, ratio in rows:
        print(f"| {name} | {error:.1e} | {ours:.3f} | {theirs:.3f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
