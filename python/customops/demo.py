"""python -m customops.demo: each op through every path a user has.

For every operator in the benchmark table and every available device, runs the
op's nn.Module in Python eager mode, under torch.compile(fullgraph=True,
dynamic=True), and as a TorchScript model saved here and run by the C++ example
app (examples/torchscript_runner.cpp), and compares each with the plain-PyTorch
reference computed in float64. Exits non-zero if any path disagrees.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import torch

from .benchmark.report import columns
from .benchmark.table import TABLE
from .benchmark.timing import median_ms

TOLERANCE = 1e-4  # float32 inputs; max abs error against the float64 reference


def _run_cpp(runner: str, module: torch.nn.Module, inputs: tuple, device: torch.device, tmp: Path):
    module.example_inputs = [t.detach().cpu() for t in inputs]
    model, output = tmp / "model.pt", tmp / "out.pt"
    torch.jit.script(module).save(str(model))
    done = subprocess.run([runner, str(model), "--device", str(device), "--repeats", "20", "--output", str(output)],
                          capture_output=True, text=True, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return torch.load(output), report["median_ms"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runner", required=True, help="path of the built customops_torchscript app")
    args = p.parse_args(argv)

    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    rows = [("op", "device", "path", "max abs error", "ms", "reference ms")]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for entry in TABLE:
            for device in devices:
                demo = entry.demo(device)
                expected = demo.reference(*(t.double() for t in demo.inputs))
                ref_ms = median_ms(lambda: demo.reference(*demo.inputs), device)
                compiled = torch.compile(demo.module, fullgraph=True, dynamic=True)
                paths = {
                    "python eager": lambda: (demo.module(*demo.inputs),
                                             median_ms(lambda: demo.module(*demo.inputs), device)),
                    "torch.compile": lambda: (compiled(*demo.inputs), median_ms(lambda: compiled(*demo.inputs), device)),
                    "TorchScript in C++": lambda: _run_cpp(args.runner, demo.module, demo.inputs, device, Path(tmp)),
                }
                for path, run in paths.items():
                    with torch.no_grad():
                        out, ms = run()
                    err = (out.to(expected.device, torch.float64) - expected).abs().max().item()
                    ok &= err <= TOLERANCE
                    rows.append((entry.name, device.type, path, f"{err:.2e}", f"{ms:.4f}", f"{ref_ms:.4f}"))
    print(columns(rows))
    print("all paths agree with the reference" if ok else f"MISMATCH: some error is above {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
