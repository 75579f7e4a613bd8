"""python -m customops.benchmark.depthwise_choice: each pass of every depthwise layer of the model zoo, customops'
kernels against PyTorch's, and what customops.backends' rule picks.

    python -m customops.benchmark.depthwise_choice [--models ...] [--configs bf16-channels_last,float32-nchw]
        [--batch 128] [--markdown F.md]

The layers are those a 224x224 forward of each zoo model runs (customops.benchmark.zoo). Per distinct shape and
pass (forward, input gradient, weight gradient with the layer's bias gradient), the op runs with
customops.backends' policy forced to "customops" and to "pytorch", each timed as the median of calls queued
back to back (CUDA events), with cudnn.benchmark as PyTorch's default leaves it unless --cudnn-benchmark. The
rule's pick is what "auto" runs outside benchmark mode; per model, the sums over its layers (each counted as
often as it runs) of customops', PyTorch's, the rule's and the faster's time.
"""

from __future__ import annotations

import argparse
import collections
import sys

import torch

import customops

from . import zoo
from .models import _names, device_name
from .report import columns, markdown_table
from .timing import back_to_back_ms

PASSES = ("forward", "input_grad", "weight_grad")
FORMATS = {"bf16-channels_last": (torch.bfloat16, torch.channels_last),
           "float32-nchw": (torch.float32, torch.contiguous_format),
           "float32-channels_last": (torch.float32, torch.channels_last),
           "fp16-channels_last": (torch.float16, torch.channels_last)}


def layer_shapes(models: list[str]) -> dict[str, list[tuple]]:
    x = torch.randn(1, 3, 224, 224)
    return {name: zoo.depthwise_layers(zoo.build(name), x) for name in models}


def pass_fns(shape: tuple, batch: int, dtype, memory_format, device) -> dict[str, object]:
    c, h, w, k, stride, padding, dilation, bias = shape
    x = torch.randn(batch, c, h, w, device=device, dtype=dtype).contiguous(memory_format=memory_format)
    weight = torch.randn(c, 1, *k, device=device, dtype=dtype) / (k[0] * k[1])
    b = torch.randn(c, device=device, dtype=dtype) if bias else None
    win = (list(stride), list(padding), list(dilation))
    g = torch.randn_like(customops.depthwise_conv2d(x, weight, b, *win))
    backward = torch.ops.customops.depthwise_conv2d_backward
    return {"forward": lambda: customops.depthwise_conv2d(x, weight, b, *win),
            "input_grad": lambda: backward(g, x, weight, *win, [True, False, False]),
            "weight_grad": lambda: backward(g, x, weight, *win, [False, True, bias])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.depthwise_choice", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(zoo.ZOO))
    p.add_argument("--configs", default="bf16-channels_last,float32-nchw", help="of: " + ", ".join(FORMATS))
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--calls", type=int, default=20, help="calls queued back to back per timing")
    p.add_argument("--cudnn-benchmark", action="store_true", help="time PyTorch's side with cudnn.benchmark on")
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    names = _names(args.models, dict.fromkeys(zoo.ZOO), "model")
    configs = _names(args.configs, FORMATS, "config")
    per_model = layer_shapes(names)
    counts = collections.Counter(s for layers in per_model.values() for s in layers)
    title = f"{device_name(device)}, torch {torch.__version__}, cudnn.benchmark {args.cudnn_benchmark}"
    print(f"device: {title}; {len(counts)} distinct depthwise layers in {len(names)} models", flush=True)
    header = ("config", "C", "plane", "kernel", "stride", "bias", "layers", *(f"{p} us ours / pytorch (rule)"
                                                                              for p in PASSES))
    rows, times = [], {}
    for config in configs:
        dtype, memory_format = FORMATS[config]
        for shape in sorted(counts):
            fns = pass_fns(shape, args.batch, dtype, memory_format, device)
            c, h, w, k, stride, padding, dilation, bias = shape
            rule = customops.backends.depthwise_conv2d_rule((args.batch, c, h, w), (c, 1, *k), dtype,
                                                            memory_format == torch.channels_last, bias, stride,
                                                            padding, dilation)
            cells = []
            for name in PASSES:
                measured = {}
                for backend in ("customops", "pytorch"):
                    with customops.backends.use("depthwise_conv2d", backend):
                        measured[backend] = back_to_back_ms(fns[name], device, calls=args.calls) * 1e3
                times[(config, shape, name)] = (measured, rule[name])
                cells.append(f"{measured['customops']:.0f} / {measured['pytorch']:.0f} ({rule[name][:5]})")
            rows.append((config, str(c), f"{h}x{w}", f"{k[0]}x{k[1]}", str(stride[0]), str(int(bias)),
                         str(counts[shape]), *cells))
            print(columns([header, rows[-1]]).splitlines()[1], flush=True)
    model_header = ("config", "model", "layers", "customops ms", "pytorch ms", "rule ms", "faster-of-both ms",
                    "rule / pytorch", "rule / faster")
    model_rows = []
    for config in configs:
        for name, layers in per_model.items():
            sums = collections.Counter()
            for shape in layers:
                for pass_name in PASSES:
                    measured, pick = times[(config, shape, pass_name)]
                    sums["customops"] += measured["customops"]
                    sums["pytorch"] += measured["pytorch"]
                    sums["rule"] += measured[pick]
                    sums["best"] += min(measured.values())
            if sums["pytorch"]:
                model_rows.append((config, name, str(len(layers)), *(f"{sums[k] / 1e3:.2f}" for k in
                                                                     ("customops", "pytorch", "rule", "best")),
                                   f"{sums['rule'] / sums['pytorch']:.2f}", f"{sums['rule'] / sums['best']:.3f}"))
    print()
    print(columns([model_header] + model_rows))
    if args.markdown:
        command = "python -m customops.benchmark.depthwise_choice " + " ".join(sys.argv[1:] if argv is None else argv)
        preamble = (f"Measured on {title}.\n\nCommand: `{command}`. Batch {args.batch}; each time the median of "
                    f"{args.calls} calls queued back to back. Per model: the sum over its depthwise layers of "
                    "forward, input gradient and weight (+ bias) gradient times.")
        with open(args.markdown, "w") as f:
            f.write(markdown_table(preamble, model_header, model_rows))
            f.write("\n\n## Per layer\n\n")
            f.write(markdown_table("", header, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
