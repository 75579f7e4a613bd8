"""python -m customops.benchmark.causal_anchors: causal_conv1d against the kernels Mamba-style models use, on CUDA.

    python -m customops.benchmark.causal_anchors [--quick] [--markdown F.md] [--plot F.png]

The anchors, each timed only where it is installed (a note in the table says which were missing):

- Dao's causal-conv1d (``pip install causal-conv1d``): ``causal_conv1d_fn`` (its CUDA kernels) and
  ``causal_conv1d_update``;
- fla's Triton kernels (``pip install fla-core``): ``fla.modules.causal_conv1d.causal_conv1d`` (backend
  "triton") and ``causal_conv1d_update``.

Training cases: bf16, Mamba's layout (the activations (B, L, C) in memory, given to customops and Dao as the
(B, C, L) transpose, to fla as they are), width 4; forward alone and forward + backward (the gradients of x, weight
and bias), each without an activation, with SiLU, and with SiLU over packed sequences (customops' and Dao's
``seq_idx``; fla takes the rows as one packed row with ``cu_seqlens`` marking the same boundaries: the same work).
Decoding cases: one step, ``x`` (B, C), the state updated in place, at batch 1, 16 and 256.

Each time is the median of rounds, in ABBA order between the implementations, of calls queued back to back (CUDA
events behind a GPU sleep, so the host's launch time overlaps the GPU's work). Beside them, the fewest bytes each
pass must move and the time a ``clone`` of that many bytes (read + write) takes in the same run: the bound a
memory-bound kernel can approach.
"""

from __future__ import annotations

import argparse
import datetime
import math
import statistics
import sys
from dataclasses import dataclass
from typing import Callable, Optional

import torch

import customops

from .models import device_name
from .report import columns, markdown_table
from .timing import back_to_back_ms

WIDTH = 4
DTYPE = torch.bfloat16
# (B, C, L): Mamba-130M's inner width, Mamba-2.8B's (5120), and one long sequence.
TRAIN_SHAPES = [(8, 1536, 2048), (4, 5120, 2048), (1, 4096, 65536)]
QUICK_TRAIN_SHAPES = [(2, 256, 512)]
DECODE_BATCHES, DECODE_CHANNELS = (1, 16, 256), 5120
VARIANTS = ("none", "silu", "silu+seq_idx")


def interleaved_back_to_back_ms(fns: list[Callable[[], object]], device: torch.device, rounds: int,
                                calls: int) -> list[float]:
    """back_to_back_ms of each of fns, in rounds of ABBA order so that clock and temperature drift hit them alike:
    the median over the rounds, in milliseconds."""
    times: list[list[float]] = [[] for _ in fns]
    for r in range(rounds):
        for i in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
            times[i].append(back_to_back_ms(fns[i], device, warmup=1 if r else 3, calls=calls))
    return [statistics.median(t) for t in times]


@dataclass
class Anchors:
    dao_fn: Optional[Callable] = None
    dao_update: Optional[Callable] = None
    fla_fn: Optional[Callable] = None
    fla_update: Optional[Callable] = None
    notes: tuple = ()


def find_anchors() -> Anchors:
    found, notes = Anchors(), []
    try:
        from causal_conv1d import causal_conv1d_fn, causal_conv1d_update

        import causal_conv1d_cuda  # noqa: F401  (the compiled kernels themselves, not a Python fallback)

        found.dao_fn, found.dao_update = causal_conv1d_fn, causal_conv1d_update
    except ImportError as e:
        notes.append(f"Dao's causal-conv1d not installed ({e}): no Dao column")
    try:
        from fla.modules.causal_conv1d import causal_conv1d as fla_fn
        from fla.modules.causal_conv1d import causal_conv1d_update as fla_update

        found.fla_fn, found.fla_update = fla_fn, fla_update
    except ImportError as e:
        notes.append(f"fla (fla-core) not installed ({e}): no fla column")
    found.notes = tuple(notes)
    return found


def packed_rows(b: int, n: int, device, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """seq_idx (B, L) int32, about one sequence per 512 steps of random lengths in each row, and cu_seqlens, the
    same boundaries over the B rows laid end to end (fla's packed form)."""
    rows, starts = [], [0]
    for r in range(b):
        cuts = sorted(torch.randperm(n - 1, generator=generator)[:max(1, n // 512) - 1].add(1).tolist())
        bounds = [0, *cuts, n]
        rows.append(torch.cat([torch.full((hi - lo,), i, dtype=torch.int32) for i, (lo, hi) in
                               enumerate(zip(bounds, bounds[1:]))]))
        starts += [r * n + hi for hi in bounds[1:]]
    return torch.stack(rows).to(device), torch.tensor(starts, dtype=torch.int32, device=device)


def train_calls(anchors: Anchors, b: int, c: int, n: int, variant: str, device) -> dict[str, dict]:
    """Per implementation: "forward" and "forward+backward" calls on the same inputs, and "out", the forward's
    result as (B, C, L) for the agreement check."""
    gen = torch.Generator(device).manual_seed(0)
    x_blc = torch.randn(b, n, c, generator=gen, device=device, dtype=DTYPE).requires_grad_()
    x = x_blc.transpose(1, 2)  # (B, C, L) view of Mamba's activations
    w = (torch.randn(c, WIDTH, generator=gen, device=device, dtype=DTYPE) / 2).requires_grad_()
    bias = torch.randn(c, generator=gen, device=device, dtype=DTYPE).requires_grad_()
    activation = None if variant == "none" else "silu"
    seq_idx, cu_seqlens = (packed_rows(b, n, device, torch.Generator().manual_seed(0)) if "seq_idx" in variant
                           else (None, None))
    leaves = (x_blc, w, bias)

    def timed(forward: Callable[[], torch.Tensor], to_bcl: Callable[[torch.Tensor], torch.Tensor]) -> dict:
        y = forward()
        g = torch.randn_like(y)  # in the output's layout, as the next layer's gradient would be
        return {"forward": lambda: forward(), "forward+backward": lambda: torch.autograd.grad(forward(), leaves, g),
                "out": to_bcl(y.detach())}

    calls = {"customops": timed(lambda: customops.causal_conv1d(x, w, bias, activation=activation, seq_idx=seq_idx),
                                lambda y: y)}
    if anchors.dao_fn is not None:
        calls["Dao"] = timed(lambda: anchors.dao_fn(x, w, bias, seq_idx=seq_idx, activation=activation), lambda y: y)
    if anchors.fla_fn is not None:
        if cu_seqlens is None:
            def fla_forward():
                return anchors.fla_fn(x_blc, w, bias, activation=activation, backend="triton")[0]
        else:
            packed = x_blc.reshape(1, b * n, c)
            from fla.ops.utils import prepare_chunk_indices

            chunks = prepare_chunk_indices(cu_seqlens, 64)  # once, as a model's data loader would

            def fla_forward():
                return anchors.fla_fn(packed, w, bias, activation=activation, backend="triton",
                                      cu_seqlens=cu_seqlens, chunk_indices=chunks)[0]
        calls["fla"] = timed(fla_forward, lambda y: y.reshape(b, n, c).transpose(1, 2))
    return calls


def train_bytes(b: int, c: int, n: int, variant: str, pass_name: str) -> int:
    """The fewest bytes a pass moves: the forward reads x and writes y; the backward reads the output's gradient
    and x (the SiLU's derivative needs the pre-activation again, recomputed from x) and writes x's gradient.
    seq_idx is read once per pass. The filters and bias are a few KB."""
    elems = b * c * n * DTYPE.itemsize
    seq = b * n * 4 if "seq_idx" in variant else 0
    return 2 * elems + seq if pass_name == "forward" else 5 * elems + 2 * seq


def decode_calls(anchors: Anchors, batch: int, c: int, device) -> tuple[dict[str, Callable], int]:
    """One decoding step per implementation with SiLU, each with its own state layout ((B, C, K-1) for customops
    and Dao, (B, C, K) for fla), and the fewest bytes it moves: x and y, the state read and written, the filters."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, c, generator=gen).to(device, DTYPE)
    w = (torch.randn(c, WIDTH, generator=gen) / 2).to(device, DTYPE)
    bias = torch.randn(c, generator=gen).to(device, DTYPE)
    state = torch.randn(batch, c, WIDTH - 1, generator=gen).to(device, DTYPE)
    calls = {}
    if _has_update():
        ours = state.clone()
        calls["customops"] = lambda: customops.causal_conv1d_update(x, ours, w, bias, activation="silu")
    if anchors.dao_update is not None:
        dao = state.clone()
        calls["Dao"] = lambda: anchors.dao_update(x, dao, w, bias, activation="silu")
    if anchors.fla_update is not None:
        fla = torch.cat([state.new_zeros(batch, c, 1), state], dim=-1)

        calls["fla"] = lambda: anchors.fla_update(x, fla, weight=w, bias=bias, activation="silu")[0]
    nbytes = (2 * batch * c + 2 * batch * c * (WIDTH - 1) + c * (WIDTH + 1)) * DTYPE.itemsize
    return calls, nbytes


def _has_update() -> bool:
    # The function and the library's op: a library built before the decoding step has the one without the other.
    return hasattr(customops, "causal_conv1d_update") and "update" in torch.ops.customops.causal_conv1d.overloads()


def copy_ms(nbytes: int, device, rounds: int, calls: int) -> float:
    """A clone of nbytes / 2 bytes: nbytes moved, read plus written."""
    src = torch.empty(max(1, nbytes // 4), dtype=torch.float16, device=device).uniform_()
    return interleaved_back_to_back_ms([src.clone], device, rounds, calls)[0]


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-6))


IMPLS = ("customops", "Dao", "fla")
HEADER = ("case", "pass", "customops ms", "Dao ms", "fla ms", "customops/Dao", "customops/fla", "MB moved",
          "copy ms", "customops %copy", "Dao %copy", "fla %copy")


def _row(case: str, pass_name: str, times: dict[str, float], nbytes: int, copy: float) -> tuple[str, ...]:
    def ms(k):
        return f"{times[k]:.4f}" if k in times else "-"

    def ratio(k):
        return f"{times['customops'] / times[k]:.2f}" if k in times and "customops" in times else "-"

    def share(k):
        return f"{100 * copy / times[k]:.0f}%" if k in times else "-"

    return (case, pass_name, *(ms(k) for k in IMPLS), ratio("Dao"), ratio("fla"), f"{nbytes / 1e6:.1f}",
            f"{copy:.4f}", *(share(k) for k in IMPLS))


def _train_rows(anchors: Anchors, shape, device, rounds: int, calls: int, notes: list, emit) -> list:
    b, c, n = shape
    rows = []
    for variant in VARIANTS:
        case = f"B={b} C={c} L={n} K={WIDTH} {variant}"
        impls = train_calls(anchors, b, c, n, variant, device)
        for name, fns in impls.items():
            if name != "customops":
                diff = relative_difference(impls["customops"]["out"], fns["out"])
                if diff > 2e-2:
                    notes.append(f"{case}: {name}'s output differs from customops' by {diff:.3g} of its largest")
                print(f"  {case}: {name} agrees with customops to {diff:.2g} of the largest value", flush=True)
        for pass_name in ("forward", "forward+backward"):
            names = list(impls)
            times = dict(zip(names, interleaved_back_to_back_ms([impls[k][pass_name] for k in names], device,
                                                                rounds, calls)))
            nbytes = train_bytes(b, c, n, variant, pass_name)
            rows.append(_row(case, pass_name, times, nbytes, copy_ms(nbytes, device, rounds, calls)))
            print(columns([HEADER, rows[-1]]).splitlines()[1], flush=True)
            emit(rows, notes)
        del impls
    return rows


def _decode_rows(anchors: Anchors, batches, c: int, device, rounds: int, calls: int, notes: list, emit) -> list:
    if not _has_update():
        notes.append("this build has no customops.causal_conv1d_update: the decoding rows time the anchors alone")
    rows = []
    for batch in batches:
        fns, nbytes = decode_calls(anchors, batch, c, device)
        if not fns:
            continue
        names = list(fns)
        times = dict(zip(names, interleaved_back_to_back_ms([fns[k] for k in names], device, rounds, calls)))
        rows.append(_row(f"decode B={batch} C={c} K={WIDTH} silu", "step", times, nbytes,
                         copy_ms(nbytes, device, rounds, calls)))
        print(columns([HEADER, rows[-1]]).splitlines()[1], flush=True)
        emit(rows, notes)
    return rows


def run(device: torch.device, quick: bool, rounds: int, calls: int,
        emit: Callable[..., None] = lambda rows, notes, done=False: None) -> tuple[list[tuple[str, ...]], list[str]]:
    """The table's rows and notes. emit(rows, notes) after each row, and emit(rows, notes, True) after each group of
    cases (the Markdown and plot so far, kept if a run is cut short): the first training shape, the decoding steps,
    then the other training shapes, the longest last."""
    anchors = find_anchors()
    notes = list(anchors.notes)
    for note in notes:
        print("note:", note, flush=True)
    rows: list = []

    def grown(part, notes_):  # the rows of the groups done, then those of this one so far
        emit(rows + part, notes_)

    shapes = QUICK_TRAIN_SHAPES if quick else TRAIN_SHAPES
    groups = [lambda: _train_rows(anchors, shapes[0], device, rounds, calls, notes, grown),
              lambda: _decode_rows(anchors, DECODE_BATCHES[:1] if quick else DECODE_BATCHES,
                                   256 if quick else DECODE_CHANNELS, device, rounds, calls, notes, grown)]
    groups += [lambda shape=shape: _train_rows(anchors, shape, device, rounds, calls, notes, grown)
               for shape in shapes[1:]]
    for group in groups:
        rows += group()
        emit(rows, notes, True)
    return rows, notes


def plot(rows: list[tuple[str, ...]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r[0]}\n{r[1]}".replace(" K=4", "") for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, 0.55 * len(rows)), 8), sharex=True)
    width = 0.38
    for k, (column, name) in enumerate(((5, "customops / Dao"), (6, "customops / fla"))):
        values = [float(r[column]) if r[column] != "-" else math.nan for r in rows]
        top.bar([i + (k - 0.5) * width for i in range(len(rows))], values, width, label=name)
    top.axhline(1, color="grey", linewidth=0.8, linestyle="--")
    top.set_ylabel("time ratio (below 1: customops faster)")
    top.legend(fontsize=8)
    width = 0.8 / len(IMPLS)
    for k, name in enumerate(IMPLS):
        values = [float(r[9 + k].rstrip("%")) if r[9 + k] != "-" else math.nan for r in rows]
        bottom.bar([i + (k - 1) * width for i in range(len(rows))], values, width, label=name)
    bottom.axhline(100, color="grey", linewidth=0.8, linestyle="--")
    bottom.set_ylabel("bytes moved / time, % of a clone's")
    bottom.set_xticks(range(len(rows)), labels, fontsize=6, rotation=90)
    bottom.legend(fontsize=8)
    top.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.causal_anchors", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test, not a measurement)")
    p.add_argument("--rounds", type=int, default=3, help="ABBA rounds; each time is their median")
    p.add_argument("--calls", type=int, default=10, help="calls queued back to back per round")
    p.add_argument("--markdown")
    p.add_argument("--plot")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("causal_anchors: the anchors run on CUDA only, and this machine has no CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    command = "python -m customops.benchmark.causal_anchors " + " ".join(sys.argv[1:] if argv is None else argv)
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    versions = [f"torch {torch.__version__}"]
    for module, name in (("causal_conv1d", "causal-conv1d"), ("fla", "fla-core"), ("triton", "triton")):
        try:
            versions.append(f"{name} {__import__(module).__version__}")
        except ImportError:
            pass
    title = f"{device_name(device)}, {', '.join(versions)}, {now}"
    preamble = (
        f"Measured on {title}.\n\nCommand: `{command}`. bf16, width 4, Mamba's layout (activations (B, L, C) in "
        "memory: customops and Dao take the (B, C, L) transpose, fla the (B, L, C) tensor); forward+backward "
        "computes the gradients of x, weight and bias. seq_idx rows hold about one sequence per 512 steps (fla: "
        "the same boundaries as `cu_seqlens` over the rows packed end to end). Decode: one step with SiLU, the "
        "state updated in place. Each time is the median of "
        f"{args.rounds} rounds (ABBA order between the implementations) of {args.calls} calls queued back to back "
        "(CUDA events); a/b below 1 means customops is faster. MB moved: the fewest bytes the pass must read and "
        "write; copy ms: a `clone` of that many bytes (read + write) in the same run; %copy: copy ms over the "
        "implementation's time.")

    def document(rows, notes) -> str:  # the preamble, the notes as a list after it, the table
        return markdown_table(preamble + "".join(f"\n\n- {n}" if i == 0 else f"\n- {n}" for i, n in
                                                 enumerate(notes)), HEADER, rows)

    def emit(rows, notes, done=False):
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(document(rows, notes))
        if done and args.plot and rows:
            plot(rows, args.plot, title)

    rows, notes = run(device, args.quick, args.rounds, args.calls, emit)
    print()
    print(document(rows, notes))
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
