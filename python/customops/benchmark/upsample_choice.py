"""python -m customops.benchmark.upsample_choice: upsample_bilinear2d on CUDA, customops' kernels against
PyTorch's per pass, and what customops.backends' rule picks; with --compiled, compiled resizes instead.

    python -m customops.benchmark.upsample_choice [--compiled] [--markdown F.md]

Eager: per case (input shape, scale, dtype, layout) each pass (forward, backward) runs with customops.backends'
policy forced to "customops" and to "pytorch", each timed as the median of calls queued back to back (CUDA
events); the rule's pick is what "auto" runs outside benchmark mode. The summary sums every case's time for
customops alone, PyTorch alone, the rule's picks and the faster of the two.

--compiled: ``relu(resize(x))`` forward and backward compiled (Inductor, default mode), bf16 channels_last and
float32 NCHW, on a few of the shapes by 2 and by 0.5, with the op
kept whole (customops.inductor.set_decomposed(..., False)), decomposed as by default (the forward as gathers,
the backward per call as eager chooses), and F.interpolate compiled (PyTorch's own resize), each a step's
time queued back to back.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import math
import sys

import torch
import torch.nn.functional as F

import customops

from .models import device_name
from .report import columns, markdown_table
from .timing import back_to_back_ms

OP = "upsample_bilinear2d"
SHAPES = [(1, 3, 32, 32), (2, 16, 16, 16), (8, 64, 14, 14), (2, 32, 64, 64), (16, 64, 32, 32), (8, 256, 28, 28),
          (16, 64, 128, 128), (4, 3, 224, 224), (1, 256, 64, 64), (32, 128, 56, 56), (2, 19, 128, 256),
          (8, 512, 7, 7)]
SCALES = (2.0, 0.5, 1.75, 4.0)
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# The model zoo's two configurations, on a decoder's kinds of resize.
COMPILED_SHAPES = [(16, 64, 32, 32), (16, 64, 128, 128), (2, 19, 128, 256)]
COMPILED_CONFIGS = ((torch.bfloat16, True), (torch.float32, False))


def cases(shapes, scales, configs):
    for shape, scale, (dtype, channels_last) in itertools.product(shapes, scales, configs):
        size = [max(1, int(shape[2] * scale)), max(1, int(shape[3] * scale))]
        yield shape, scale, size, dtype, channels_last


def _input(shape, dtype, channels_last, device):
    x = torch.randn(shape, device=device, dtype=dtype)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


TRIES = 2


def _best_of(fn, device) -> float:
    return min(back_to_back_ms(fn, device, calls=40) for _ in range(TRIES))


def eager_rows(device, dtypes):
    rows, sums = [], {"customops": 0.0, "pytorch": 0.0, "rule": 0.0, "faster": 0.0}
    off = 0
    for shape, scale, size, dtype, channels_last in cases(SHAPES, SCALES, itertools.product(dtypes, (False, True))):
        x = _input(shape, dtype, channels_last, device)
        g = torch.randn_like(customops.upsample_bilinear2d(x, size, "half_pixel"))
        fns = {"forward": lambda: torch.ops.customops.upsample_bilinear2d(x, size, "half_pixel"),
               "backward": lambda: torch.ops.customops.upsample_bilinear2d_backward(g, list(shape[2:]), "half_pixel")}
        picks = customops.backends.upsample_bilinear2d_rule(shape, size, dtype, channels_last)
        for name, fn in fns.items():
            t = {}
            for policy in ("customops", "pytorch"):
                with customops.backends.use(OP, policy):
                    t[policy] = _best_of(fn, device)
            rule_ms, best = t[picks[name]], min(t.values())
            off += rule_ms > 1.1 * best
            for k, v in (("customops", t["customops"]), ("pytorch", t["pytorch"]), ("rule", rule_ms), ("faster", best)):
                sums[k] += v
            rows.append(("x".join(map(str, shape)), f"{scale:g}", str(dtype)[6:], "channels_last" if channels_last
                         else "NCHW", name, f"{t['customops']:.4f}", f"{t['pytorch']:.4f}",
                         f"{t['customops'] / t['pytorch']:.2f}", picks[name], f"{rule_ms / best:.2f}"))
            print(columns([EAGER_HEADER, rows[-1]]).splitlines()[1], flush=True)
    return rows, sums, off


EAGER_HEADER = ("input", "scale", "dtype", "layout", "pass", "customops ms", "pytorch ms", "customops/pytorch",
                "rule", "rule/faster")
COMPILED_HEADER = ("input", "scale", "dtype", "layout", "op whole ms", "decomposed ms", "F.interpolate ms",
                   "decomposed/whole", "decomposed/F.interpolate")


def compiled_rows(device):
    from customops import inductor

    rows = []
    for shape, scale, size, dtype, channels_last in cases(COMPILED_SHAPES, (2.0, 0.5), COMPILED_CONFIGS):
        x = _input(shape, dtype, channels_last, device).requires_grad_()
        times = []
        for variant in ("whole", "decomposed", "interpolate"):
            if variant == "interpolate":
                def fn(x):
                    return torch.relu(F.interpolate(x, size=size, mode="bilinear", align_corners=False))
            else:
                def fn(x):
                    return torch.relu(customops.upsample_bilinear2d(x, size, "half_pixel"))
            before = inductor.decomposed()[OP]
            inductor.set_decomposed(OP, variant != "whole")
            try:
                torch._dynamo.reset()
                step_fn = torch.compile(fn)

                def step():
                    y = step_fn(x)
                    y.backward(torch.ones_like(y))
                times.append(_best_of(step, device))
            finally:
                inductor.set_decomposed(OP, before)
        rows.append(("x".join(map(str, shape)), f"{scale:g}", str(dtype)[6:],
                     "channels_last" if channels_last else "NCHW", *(f"{t:.4f}" for t in times),
                     f"{times[1] / times[0]:.2f}", f"{times[1] / times[2]:.2f}"))
        print(columns([COMPILED_HEADER, rows[-1]]).splitlines()[1], flush=True)
    torch._dynamo.reset()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.upsample_choice", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", default="float32,float16,bfloat16")
    p.add_argument("--compiled", action="store_true", help="time compiled resizes instead")
    p.add_argument("--tries", type=int, default=2, help="runs of each timing, the best kept")
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    global TRIES
    TRIES = args.tries
    device = torch.device("cuda")
    dtypes = [DTYPES[d] for d in args.dtypes.split(",")]
    command = "python -m customops.benchmark.upsample_choice " + " ".join(sys.argv[1:] if argv is None else argv)
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    preamble = f"Measured on {device_name(device)}, torch {torch.__version__}, {now}.\n\nCommand: `{command}`. "
    if args.compiled:
        rows = compiled_rows(device)
        geo = math.exp(sum(math.log(float(r[-2])) for r in rows) / len(rows))
        text = markdown_table(
            preamble + "`relu(resize(x))`, forward and backward compiled with `torch.compile` (default mode), "
            "half_pixel; one step's time, the median of steps queued back to back (CUDA events), the best of "
            f"{TRIES} runs. Geomean decomposed/whole {geo:.2f}.", COMPILED_HEADER, rows)
    else:
        rows, sums, off = eager_rows(device, dtypes)
        summary = (f"Over the {len(rows)} passes, summed: customops alone {sums['customops']:.3f} ms, PyTorch alone "
                   f"{sums['pytorch']:.3f} ms, the rule's picks {sums['rule']:.3f} ms, the faster each time "
                   f"{sums['faster']:.3f} ms (rule/faster {sums['rule'] / sums['faster']:.3f}); {off} passes where "
                   "the rule's pick is over 10% slower than the faster.")
        print(summary)
        text = markdown_table(
            preamble + "half_pixel resizes; times are medians of calls queued back to back (CUDA events), the "
            f"best of {TRIES} runs; where PyTorch's kernel may not take a call (a half-type backward upscale), the "
            f"policy \"pytorch\" runs customops' and both columns time it. {summary}", EAGER_HEADER, rows)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
