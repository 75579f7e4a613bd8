"""python -m customops.benchmark: time every op of the table against PyTorch."""

from __future__ import annotations

import argparse
import platform
import sys

import torch

from .report import Row, markdown, plot, text_table
from .table import TABLE
from .timing import copy_bandwidth, median_ms


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--ops", nargs="*", help="only these ops (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test, not a measurement)")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--markdown", help="write the table as Markdown to this file")
    p.add_argument("--plot", help="write a PNG bar plot to this file")
    args = p.parse_args(argv)

    device = torch.device(args.device)
    copy_bw = copy_bandwidth(device, (64 if args.quick else 1024) * 2**20 if device.type == "cuda" else 64 * 2**20)
    print(f"device: {device_name(device)}; torch {torch.__version__}; copy bandwidth {copy_bw / 1e9:.0f} GB/s",
          flush=True)

    rows: list[Row] = []
    for entry in TABLE:
        if args.ops and entry.name not in args.ops:
            continue
        for case in entry.cases(device, args.quick):
            state = case.setup()
            ours = median_ms(lambda: case.ours(state), device, repeats=args.repeats)
            for baseline, fn in case.pytorch.items():
                theirs = median_ms(lambda: fn(state), device, repeats=args.repeats)
                rows.append(Row(case.op, case.name, str(case.dtype).removeprefix("torch."), ours, baseline, theirs,
                                case.bytes / (ours * 1e-3) / copy_bw, case.bytes / (theirs * 1e-3) / copy_bw))
                print(text_table(rows[-1:]).splitlines()[1], flush=True)
            del state

    print()
    print(text_table(rows))
    command = "python -m customops.benchmark " + " ".join(sys.argv[1:] if argv is None else argv)
    title = (f"{device_name(device)}, torch {torch.__version__}, copy {copy_bw / 1e9:.0f} GB/s "
             "(read + write)")
    if args.markdown:
        preamble = (f"Measured on {title}.\n\nCommand: `{command}`. Times are medians of {args.repeats} runs "
                    "after warm-up (CUDA events on GPU, wall clock on CPU); %copy is the fewest bytes the work "
                    "must move divided by time, over the copy bandwidth measured in the same run; "
                    "ours/pytorch below 1 means customops is faster.")
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, preamble))
    if args.plot:
        plot(rows, args.plot, title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
