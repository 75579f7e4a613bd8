"""python -m customops.benchmark.executorch: each op in ExecuTorch's runtime on this machine's CPU, by each route.

    python -m customops.benchmark.executorch [--scale 8] [--markdown F.md]
    python -m customops.benchmark.executorch --depthwise [--markdown F.md]

Per op, its benchmark demo (customops.benchmark.ops: the module and inputs of ``python -m customops.demo``), every
input repeated `--scale` times along its first dimension, is exported and lowered three ways, each run by
ExecuTorch's runtime in this process (``executorch.runtime``, the median of repeated calls):

- ``decomposed+xnnpack``: the op's core-ATen decomposition, the XNNPACK delegate taking what it supports;
- ``decomposed``: the decomposition on ExecuTorch's portable kernels alone;
- ``kernel``: customops' own kernel (the op's out variant; lowered with XNNPACK, which takes none of it), for the
  ops that have one (customops.executorch) where the demo's call takes it.

and, for scale, customops' libtorch CPU kernel (``eager``) in the same process. ``route`` is the op's default
route (customops.executorch.routes()). Ratios are to the decomposed+xnnpack program, the route that needs nothing
of customops on the device.

``--depthwise``: depthwise_conv2d alone on shapes of the layers networks have (3x3 to 7x7, strided), each lowered
with XNNPACK by the decomposition and with every call on customops' kernel (whatever the filter's width, which
the default route weighs: customops.executorch.conv), the two programs taking turns call by call.
"""

from __future__ import annotations

import argparse
import datetime
import sys

import torch

import customops
import customops.executorch as et_routes

from .models import device_name, interleaved_ms
from .report import columns, markdown_table
from .table import TABLE
from .timing import median_ms

LOWERINGS = ("decomposed+xnnpack", "decomposed", "kernel")
CPU = torch.device("cpu")


def _scaled(inputs, scale: int):
    return tuple(t.repeat(scale, *([1] * (t.dim() - 1))) for t in inputs)


def _program_ms(module, inputs, op: str, lowering: str, repeats: int):
    """The program's time per call, or None where the kernel route left no call to customops' kernel (a resize
    that aten.upsample_bilinear2d expresses is decomposed on either route)."""
    from executorch.runtime import Runtime

    from ..deploy.pte import lower, operators

    route = "kernel" if lowering == "kernel" else "decomposition"
    with et_routes.use_route(op, route):
        exported = torch.export.export(module, inputs)
        program = lower(exported, "portable" if lowering == "decomposed" else "xnnpack")
    if route == "kernel" and f"customops::{op}" not in operators(program):
        return None
    buffer = program.buffer  # the loaded program reads it: it must outlive the calls
    method = Runtime.get().load_program(buffer).load_method("forward")
    args = list(inputs)
    return median_ms(lambda: method.execute(args), CPU, warmup=3, repeats=repeats)


def rows(scale: int, repeats: int):
    if et_routes.kernel_library():
        et_routes.load_kernels()
    kernel_ops = et_routes.kernel_ops() if et_routes.kernel_library() else set()
    for entry in TABLE:
        demo = entry.demo(CPU)
        module, inputs = demo.module.eval(), _scaled(demo.inputs, scale)
        with torch.no_grad():
            t = {"eager": median_ms(lambda: module(*inputs), CPU, warmup=3, repeats=repeats)}
            for lowering in LOWERINGS:
                if lowering == "kernel" and entry.name not in kernel_ops:
                    continue
                ms = _program_ms(module, inputs, entry.name, lowering, repeats)
                if ms is not None:
                    t[lowering] = ms
        shape = " ".join("x".join(map(str, x.shape)) for x in inputs)
        yield entry.name, shape, et_routes.routes()[entry.name], t


# Calls of each program, one at a time, the two taking turns (ABBA).
DEPTHWISE_CALLS = 150
# (N, C, H, W, filter, stride, channel multiplier): the demo's layer, MobileNet's, EfficientNet's and ConvNeXt's,
# and layers with a multiplier or few channels (the row kernel's calls; the others run blocked over channels).
DEPTHWISE_SHAPES = ((16, 8, 33, 31, 7, 1, 1), (1, 64, 28, 28, 7, 1, 1), (8, 32, 56, 56, 3, 1, 1),
                    (4, 16, 32, 32, 3, 2, 1), (1, 96, 48, 48, 3, 1, 1), (4, 32, 16, 16, 3, 2, 1),
                    (1, 120, 14, 14, 5, 1, 1), (1, 144, 24, 24, 3, 2, 1), (1, 384, 6, 6, 3, 1, 1),
                    (1, 32, 56, 56, 5, 2, 1), (16, 8, 33, 31, 7, 1, 2), (4, 32, 28, 28, 3, 1, 2),
                    (4, 32, 28, 28, 5, 1, 2), (8, 4, 56, 56, 7, 1, 1), (8, 4, 56, 56, 3, 1, 1),
                    (1, 3, 112, 112, 3, 2, 4))


def depthwise_rows():
    from executorch.runtime import Runtime

    from ..deploy.pte import lower
    from ..executorch import conv

    et_routes.load_kernels()
    torch.manual_seed(0)
    for n, c, h, w, k, s, m in DEPTHWISE_SHAPES:
        module = customops.DepthwiseConv2d(c, c * m, k, stride=s, padding=k // 2).eval()
        x = torch.randn(n, c, h, w)
        programs = []
        for route, when in (("decomposition", conv.depthwise_uses_kernel), ("kernel", conv.depthwise_takes_kernel)):
            # Every call on the kernel: the default's width threshold set aside for the measurement behind it.
            conv.KERNEL_WHEN["depthwise_conv2d"] = when
            try:
                with et_routes.use_route("depthwise_conv2d", route):
                    programs.append(lower(torch.export.export(module, (x,)), "xnnpack").buffer)
            finally:
                conv.KERNEL_WHEN["depthwise_conv2d"] = conv.depthwise_uses_kernel
        methods = [Runtime.get().load_program(b).load_method("forward") for b in programs]
        xnnpack_ms, kernel_ms = interleaved_ms([lambda m=m: m.execute([x]) for m in methods], CPU, warmup=3,
                                               repeats=DEPTHWISE_CALLS)
        default = "kernel" if et_routes.uses_kernel("depthwise_conv2d", x, module.weight, module.bias, module.stride,
                                                     module.padding, module.dilation) else "decomposition"
        yield (f"{n}x{c}x{h}x{w}", f"{k}x{k}", str(s), str(m), default, f"{xnnpack_ms:.3f}", f"{kernel_ms:.3f}",
               f"{kernel_ms / xnnpack_ms:.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=8, help="each demo input repeated this many times (dim 0)")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--markdown", help="write the table, with its command, machine and date, to this file")
    parser.add_argument("--depthwise", action="store_true",
                        help="depthwise_conv2d alone on network shapes: XNNPACK against customops' kernel")
    args = parser.parse_args(argv)
    if args.depthwise:
        return _depthwise_table(args.markdown)
    header = ("op", "inputs", "route", "eager ms", *(f"{k} ms" for k in LOWERINGS), "kernel / decomposed+xnnpack")
    cells = []
    for op, shape, route, t in rows(args.scale, args.repeats):
        ms = [f"{t[k]:.3f}" if k in t else "-" for k in ("eager", *LOWERINGS)]
        ratio = f"{t['kernel'] / t['decomposed+xnnpack']:.2f}" if "kernel" in t else "-"
        cells.append((op, shape, route, *ms, ratio))
        print(columns([header, cells[-1]]).splitlines()[-1], file=sys.stderr, flush=True)
    print(columns([header, *cells]))
    if args.markdown:
        import executorch.version as et_version

        machine = device_name(CPU)
        preamble = (f"`python -m customops.benchmark.executorch --scale {args.scale}` on {machine}, "
                    f"{datetime.date.today()}, torch {torch.__version__}, executorch {et_version.__version__}: "
                    "the median time of one call of each op's program in ExecuTorch's runtime, float32.")
        with open(args.markdown, "w") as f:
            f.write(markdown_table(preamble, header, cells))
    return 0


def _depthwise_table(markdown) -> int:
    header = ("input", "filter", "stride", "multiplier", "default route", "decomposed+xnnpack ms", "kernel ms",
              "kernel / decomposed+xnnpack")
    cells = []
    for row in depthwise_rows():
        cells.append(row)
        print(columns([header, row]).splitlines()[-1], file=sys.stderr, flush=True)
    print(columns([header, *cells]))
    if markdown:
        import executorch.version as et_version

        preamble = (f"`python -m customops.benchmark.executorch --depthwise` on {device_name(CPU)}, "
                    f"{datetime.date.today()}, torch {torch.__version__}, executorch {et_version.__version__}: "
                    "depthwise_conv2d alone (bias, padding k // 2, float32), the "
                    f"median of {DEPTHWISE_CALLS} calls of each program, one at a time, the two taking turns.")
        with open(markdown, "w") as f:
            f.write(markdown_table(preamble, header, cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
