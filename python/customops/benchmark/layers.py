"""python -m customops.benchmark.layers: where a model's depthwise time goes, layer shape by layer shape.

    python -m customops.benchmark.layers [--device cuda|cpu] [--models mobilenet_v2,convnext_tiny,replknet31]
        [--configs float32-nchw,...] [--batch-scale F | --quick] [--repeats N] [--markdown F.md]

The model benchmark (customops.benchmark.models) times whole training steps; a ratio there says whether the
converted model is faster, not which of its convolutions make the difference. This tool runs each model once
to collect the depthwise nn.Conv2d layers it contains (input shape, kernel, stride, padding, bias, how many
layers share them), then times, for every such shape and configuration, customops' forward, input gradient and
weight gradient against PyTorch's (F.conv2d, aten.convolution_backward: cuDNN on the GPU) on tensors of that
shape, dtype and memory format. The totals weight each shape by its count of layers: the depthwise share of one
training step, ours against PyTorch's.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections import Counter
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

import customops

from .models import CONFIGS, MODELS, Config, _names, device_name, input_shape
from .report import columns, markdown_table
from .timing import median_ms

# The timed quantities: (column, what).
PARTS = (("fwd", "forward"), ("input", "input gradient"), ("weight", "weight gradient"))


@dataclass(frozen=True)
class Layer:
    shape: tuple[int, ...]  # the input's (N, C, H, W)
    weight: tuple[int, ...]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    bias: bool

    def label(self) -> str:
        k = "x".join(map(str, self.weight[2:]))
        extra = f" s{self.stride[0]}" if self.stride != (1, 1) else ""
        extra += f" d{self.dilation[0]}" if self.dilation != (1, 1) else ""
        return f"{'x'.join(map(str, self.shape))} k{k}{extra}"


def depthwise_layers(model: nn.Module, input_shape: tuple[int, ...]) -> Counter:
    """The depthwise nn.Conv2d layers (zeros padding, numeric padding) that a forward of input_shape runs,
    counted by Layer."""
    found: Counter = Counter()

    def hook(module: nn.Conv2d, inputs, output) -> None:
        found[Layer(tuple(inputs[0].shape), tuple(module.weight.shape), module.stride, module.padding,
                    module.dilation, module.bias is not None)] += 1

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, nn.Conv2d) and m.groups == m.in_channels > 1 and m.padding_mode == "zeros"
               and not isinstance(m.padding, str)]
    try:
        with torch.no_grad():
            model(torch.zeros(input_shape))
    finally:
        for h in handles:
            h.remove()
    return found


def time_layer(layer: Layer, config: Config, device: torch.device, repeats: int) -> dict[str, tuple[float, float]]:
    """{part: (ours ms, PyTorch ms)} for one layer shape in one configuration."""
    dtype = config.autocast or torch.float32
    x = torch.randn(layer.shape, device=device, dtype=dtype).contiguous(memory_format=config.memory_format)
    w = torch.randn(layer.weight, device=device, dtype=dtype) / (layer.weight[2] * layer.weight[3])
    b = torch.randn(layer.weight[0], device=device, dtype=dtype) if layer.bias else None
    s, p, d, groups = list(layer.stride), list(layer.padding), list(layer.dilation), layer.shape[1]
    g = torch.randn_like(F.conv2d(x, w, b, s, p, d, groups))

    def ours_backward(mask):
        return lambda: torch.ops.customops.depthwise_conv2d_backward(g, x, w, s, p, d, mask)

    def aten_backward(mask):
        return lambda: torch.ops.aten.convolution_backward(g, x, w, None, s, p, d, False, [0, 0], groups, mask)

    pairs = {
        "fwd": (lambda: customops.depthwise_conv2d(x, w, b, s, p, d), lambda: F.conv2d(x, w, b, s, p, d, groups)),
        "input": (ours_backward([True, False, False]), aten_backward([True, False, False])),
        "weight": (ours_backward([False, True, False]), aten_backward([False, True, False])),
    }
    with torch.no_grad():
        return {part: (median_ms(ours, device, 3, repeats), median_ms(theirs, device, 3, repeats))
                for part, (ours, theirs) in pairs.items()}


def _pair(ours: float, theirs: float) -> str:
    return f"{ours:.3f} / {theirs:.3f} ({ours / theirs:.2f})"


HEADER = ("model", "config", "layer", "count") + tuple(f"{what}: ours / PyTorch ms (ratio)" for _, what in PARTS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.layers", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default="mobilenet_v2,convnext_tiny", help=f"of {', '.join(MODELS)}")
    p.add_argument("--configs", default=",".join(MODELS["mobilenet_v2"].configs), help=f"of {', '.join(CONFIGS)}")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--batch-scale", type=float, default=1.0, help="multiply every model's default batch")
    size.add_argument("--quick", action="store_true", help="batch 2 at a small resolution (a smoke test)")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--markdown", help="write the table here")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    models, configs = _names(args.models, MODELS, "model"), _names(args.configs, CONFIGS, "config")

    rows, totals = [], []
    for name in models:
        spec = MODELS[name]
        batch, channels, resolution, _ = input_shape(spec, device, args.quick, args.batch_scale)
        layers = depthwise_layers(spec.build(channels), (1, channels, resolution, resolution))
        for config_name in configs:
            total = {part: [0.0, 0.0] for part, _ in PARTS}
            for layer, count in layers.items():
                layer = replace(layer, shape=(batch,) + layer.shape[1:])
                times = time_layer(layer, CONFIGS[config_name], device, 3 if args.quick else args.repeats)
                for part, (ours, theirs) in times.items():
                    total[part][0] += count * ours
                    total[part][1] += count * theirs
                rows.append((name, config_name, layer.label(), str(count)) +
                            tuple(_pair(*times[part]) for part, _ in PARTS))
            totals.append((name, config_name, "all depthwise layers", str(sum(layers.values()))) +
                          tuple(_pair(*total[part]) for part, _ in PARTS))
            print(columns([HEADER] + rows[-len(layers):] + totals[-1:]), flush=True)
    if args.markdown:
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        command = "python -m customops.benchmark.layers " + " ".join(argv if argv is not None else sys.argv[1:])
        preamble = (
            f"Measured on {device_name(device)}, torch {torch.__version__}, {when}.\n\n"
            f"Command: `{command}`.\n\n"
            "Each depthwise layer shape of the model (input shape at the benchmark's batch, kernel, stride; count: "
            "how many of its layers have it), customops against PyTorch (F.conv2d and aten.convolution_backward; "
            "cuDNN on GPU) on tensors of that shape in the row's dtype (bf16 configs: bfloat16 tensors, as autocast "
            "gives the convolution) and memory format; medians of repeated calls, CUDA events on GPU. Ratios below "
            "1 mean customops is faster. The 'all depthwise layers' rows weight each shape by its count.")
        with open(args.markdown, "w") as f:
            f.write(markdown_table(preamble, HEADER, totals + rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
