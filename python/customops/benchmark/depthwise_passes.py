"""python -m customops.benchmark.depthwise_passes: depthwise_conv2d's kernels per pass against cuDNN.

    python -m customops.benchmark.depthwise_passes [--only WORD] [--zoo [--batch N]] [--dtype bfloat16 ...]
        [--layout nchw]

The cases: MobileNetV2's 3x3 depthwise layer shapes (batch 128) and ConvNeXt-T's 7x7 ones (batch 64), or with
--zoo every distinct depthwise layer shape (channels, plane, kernel, stride, padding, dilation; the bias left out)
of the model zoo's timm models (customops.benchmark.zoo) at its batch (128, --batch to change) and a 224x224
input, named "<model> <C>ch<H> k<k> s<stride>" after the first model that has it. Each runs channels_last
(`--layout nchw`: contiguous), in float32, float16 and bfloat16: the forward, the input gradient (dgrad) and the
weight gradient (wgrad) of customops as it runs (its per-shape choice between its kernels and PyTorch's, timed:
cudnn.benchmark is on), of customops' own kernels (the op's policy forced to "customops", customops.backends), and
cuDNN's (F.conv2d / aten.convolution_backward), each as GPU time per call with the calls queued back to back, so
no launch gap is counted. Per pass: `cudnn` ms, `ours` ms (ours / cuDNN), `kernels` ms (kernels / cuDNN), and
`roof` ours%/kernels%/cuDNN%: the pass's minimal bytes (pass_bytes: each tensor it must read or write once) over
its time, as a share of a device copy's bandwidth measured in the same run (100%: the pass moves its bytes as
fast as a copy, its memory roof). At the end, per dtype, the geomean over the cases of ours / cuDNN and kernels /
cuDNN for the three passes' summed time, of each pass's roof shares, and of ours over the faster of cuDNN and
our kernels (`choice/best`: how well the timed choice picks), with the number of passes where ours is more than
8% slower than that. `--only WORD` keeps the cases whose
name holds WORD, `--dtype` the dtypes named."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .. import backends
from . import zoo  # the parent package, customops, has registered torch.ops.customops
from .timing import copy_bandwidth, queued_pass_ms

PASSES = ("fwd", "dgrad", "wgrad")
PICK_SLACK = 0.08  # the timed choice's pick counts as wrong where it is this much slower than the faster candidate
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ZOO_BATCH, ZOO_SIZE = 128, 224  # customops.benchmark.zoo's batch on CUDA and input size
LAYOUTS = {"channels_last": torch.channels_last, "nchw": torch.contiguous_format}


@dataclass(frozen=True)
class Case:
    name: str
    N: int
    C: int
    H: int
    W: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int] = (1, 1)


def _square(name: str, N: int, C: int, HW: int, k: int, stride: int) -> Case:
    return Case(name, N, C, HW, HW, (k, k), (stride, stride), (k // 2, k // 2))


CASES = [_square(*c) for c in (
    ("mobilenet 32ch112", 128, 32, 112, 3, 1), ("mobilenet 96ch112 s2", 128, 96, 112, 3, 2),
    ("mobilenet 144ch56", 128, 144, 56, 3, 1), ("mobilenet 144ch56 s2", 128, 144, 56, 3, 2),
    ("mobilenet 192ch28", 128, 192, 28, 3, 1), ("mobilenet 384ch14", 128, 384, 14, 3, 1),
    ("mobilenet 576ch14", 128, 576, 14, 3, 1), ("mobilenet 960ch7", 128, 960, 7, 3, 1),
    ("convnext 96ch56 k7", 64, 96, 56, 7, 1), ("convnext 192ch28 k7", 64, 192, 28, 7, 1),
    ("convnext 384ch14 k7", 64, 384, 14, 7, 1), ("convnext 768ch7 k7", 64, 768, 7, 7, 1))]

# What each pass must read or write at least once: y stands for the output and its gradient dy, x for the input
# and dx, weight for the weight and its gradient.
PASS_TENSORS = {"fwd": ("x", "weight", "y"), "dgrad": ("y", "weight", "x"), "wgrad": ("x", "y", "weight")}


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def output_size(size: int, k: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


def pass_bytes(pass_name: str, N: int, C: int, H: int, W: int, k, stride, itemsize: int, padding=None,
               dilation=1) -> int:
    """The least bytes the pass moves: each tensor it reads or writes, once. k, stride, padding and dilation are
    ints or (height, width) pairs; padding defaults to the centred dilation * (k - 1) // 2."""
    (kh, kw), (sh, sw), (dh, dw) = _pair(k), _pair(stride), _pair(dilation)
    ph, pw = _pair(padding) if padding is not None else (dh * (kh - 1) // 2, dw * (kw - 1) // 2)
    oh, ow = output_size(H, kh, sh, ph, dh), output_size(W, kw, sw, pw, dw)
    numel = {"x": N * C * H * W, "y": N * C * oh * ow, "weight": C * kh * kw}
    return sum(numel[t] for t in PASS_TENSORS[pass_name]) * itemsize


def case_bytes(pass_name: str, case: Case, itemsize: int) -> int:
    return pass_bytes(pass_name, case.N, case.C, case.H, case.W, case.kernel, case.stride, itemsize, case.padding,
                      case.dilation)


def case_name(model: str, C: int, H: int, W: int, kernel, stride, padding, dilation) -> str:
    """The case's name: "<model> <C>ch<H> k<k> s<stride>", with HxW and kxk where they differ, and the padding and
    dilation where they are not the centred padding and 1 (timm's "same"-padded stride-2 layers pad before the
    convolution, so theirs shows as p0)."""
    plane = f"{H}" if H == W else f"{H}x{W}"
    k = f"{kernel[0]}" if kernel[0] == kernel[1] else f"{kernel[0]}x{kernel[1]}"
    s = f"{stride[0]}" if stride[0] == stride[1] else f"{stride[0]}x{stride[1]}"
    name = f"{model} {C}ch{plane} k{k} s{s}"
    if tuple(padding) != tuple(d * (kk - 1) // 2 for kk, d in zip(kernel, dilation)):
        name += f" p{padding[0]}" if padding[0] == padding[1] else f" p{padding[0]}x{padding[1]}"
    if tuple(dilation) != (1, 1):
        name += f" d{dilation[0]}" if dilation[0] == dilation[1] else f" d{dilation[0]}x{dilation[1]}"
    return name


def zoo_cases(models=zoo.TIMM_MODELS, batch: int = ZOO_BATCH, size: int = ZOO_SIZE) -> list[Case]:
    """The distinct depthwise layer shapes of the zoo's models (random weights: no download), each under the name
    of the first model that runs it; the shapes come from one CPU forward of a size x size image."""
    x = torch.randn(1, 3, size, size)
    seen, cases = set(), []
    for model in models:
        for C, H, W, kernel, stride, padding, dilation, _bias in zoo.depthwise_layers(zoo.build(model), x):
            shape = (C, H, W, kernel, stride, padding, dilation)
            if shape not in seen:
                seen.add(shape)
                cases.append(Case(case_name(model, *shape), batch, *shape))
    return cases


def time_case(case: Case, dt: torch.dtype, dev: torch.device,
              layout: torch.memory_format = torch.channels_last) -> dict[str, tuple[float, float, float]]:
    """Per pass: cuDNN's, ours' (as it runs) and our kernels' (forced) ms."""
    C = case.C
    x = torch.randn(case.N, C, case.H, case.W, device=dev, dtype=dt).to(memory_format=layout)
    w = torch.randn(C, 1, *case.kernel, device=dev, dtype=dt) / (case.kernel[0] * case.kernel[1]) ** 0.5
    win = (list(case.stride), list(case.padding), list(case.dilation))
    g = torch.randn_like(F.conv2d(x, w, None, case.stride, case.padding, case.dilation, C))

    def backward(mask):
        return (lambda: torch.ops.customops.depthwise_conv2d_backward(g, x, w, *win, mask),
                lambda: torch.ops.aten.convolution_backward(g, x, w, None, *win, False, [0, 0], C, mask))

    fns = {"fwd": (lambda: torch.ops.customops.depthwise_conv2d(x, w, None, *win),
                   lambda: F.conv2d(x, w, None, case.stride, case.padding, case.dilation, C)),
           "dgrad": backward([True, False, False]),
           "wgrad": backward([False, True, False])}
    return {p: queued_pass_ms(ours, cudnn, dev, lambda: backends.use("depthwise_conv2d", "customops"))
            for p, (ours, cudnn) in fns.items()}


def roofs(case: Case, itemsize: int, times: dict, bandwidth: float) -> dict[str, tuple[float, float, float]]:
    """Per pass: ours', our kernels' and cuDNN's minimal bytes per second as a share of the copy bandwidth."""
    out = {}
    for p, (c, o, k) in times.items():
        nbytes = case_bytes(p, case, itemsize)
        out[p] = tuple(nbytes / (t * 1e-3) / bandwidth for t in (o, k, c))
    return out


def row_text(label: str, times: dict, shares: dict) -> str:
    row = label
    for p, (c, o, k) in times.items():
        ro, rk, rc = shares[p]
        row += (f" | {p} cudnn {c:.4f} ours {o:.4f} ({o / c:.2f}) kernels {k:.4f} ({k / c:.2f})"
                f" roof {ro:.0%}/{rk:.0%}/{rc:.0%}")
    return row


def geomean_text(label: str, results: list[tuple[dict, dict]]) -> str:
    """The geomean over cases of the three passes' summed time, ours and our kernels over cuDNN's, and of each
    pass's roof shares; results holds each case's (times, roofs)."""

    def total(times, i):
        return sum(t[i] for t in times.values())

    ours = zoo.geomean([total(t, 1) / total(t, 0) for t, _ in results])
    kernels = zoo.geomean([total(t, 2) / total(t, 0) for t, _ in results])
    text = f"{label} | fwd+dgrad+wgrad ours/cudnn {ours:.2f} kernels/cudnn {kernels:.2f}"
    for p in PASSES:
        ro, rk, rc = (zoo.geomean([s[p][i] for _, s in results]) for i in (0, 1, 2))
        text += f" | {p} roof {ro:.0%}/{rk:.0%}/{rc:.0%}"
    picks = [o / min(c, k) for times, _ in results for c, o, k in times.values()]
    off = sum(r > 1 + PICK_SLACK for r in picks)
    return text + f" | choice/best {zoo.geomean(picks):.2f}, >{PICK_SLACK:.0%} off in {off} of {len(picks)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="keep the cases whose name holds this word")
    parser.add_argument("--zoo", action="store_true", help="the zoo's timm models' depthwise layer shapes instead")
    parser.add_argument("--batch", type=int, default=ZOO_BATCH, help=f"with --zoo (default {ZOO_BATCH})")
    parser.add_argument("--dtype", action="append", choices=[str(d)[6:] for d in DTYPES],
                        help="run this dtype only (repeatable; default: all three)")
    parser.add_argument("--layout", choices=tuple(LAYOUTS), default="channels_last",
                        help="the input's memory format (default channels_last)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("customops.benchmark.depthwise_passes needs a CUDA device")
    cases = [c for c in (zoo_cases(batch=args.batch) if args.zoo else CASES) if args.only in c.name]
    if not cases:
        raise SystemExit(f"no case's name holds {args.only!r}")
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    bandwidth = copy_bandwidth(dev, 256 << 20)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, copy {bandwidth / 1e9:.0f} GB/s (read + write)"
          + (f"; {len(cases)} zoo depthwise shapes, batch {args.batch}" if args.zoo else "")
          + f"; {args.layout}", flush=True)
    width = max(len(c.name) for c in cases)
    summaries = []
    for dt in [getattr(torch, name) for name in args.dtype] if args.dtype else DTYPES:
        results = []
        for case in cases:
            times = time_case(case, dt, dev, LAYOUTS[args.layout])
            results.append((times, roofs(case, dt.itemsize, times, bandwidth)))
            print(row_text(f"{str(dt)[6:]:8s} {case.name:{width}s}", *results[-1]), flush=True)
        summaries.append(geomean_text(f"geomean {str(dt)[6:]:8s} ({len(results)} cases)", results))
    print("\n".join(summaries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
