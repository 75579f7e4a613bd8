"""python -m customops.demo: each op through every path a user has.

For every operator in the benchmark table and every available device, runs the
op's nn.Module in Python eager mode, under torch.compile(fullgraph=True,
dynamic=True), as a TorchScript model saved here and run by the C++ runner
(examples/torchscript_runner.cpp), and compiled by AOTInductor and run by the
C++ runner (examples/aoti_runner.cpp), and compares each with the plain-PyTorch
reference computed in float64. Exits non-zero if any path disagrees.

AOTInductor compiles C++ ahead of time (a minute or two on a small CPU machine), so
the demo compiles one package per device holding every op's module, reports that
compile time once, and then the time of one call of the whole package from C++.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from . import aoti
from ._library import runner_path
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


def _run_aoti(runner: str, demos: list, device: torch.device, tmp: Path):
    """Compiles every demo module into one AOTInductor package and runs it from C++.
    Returns (outputs, compile seconds, ms per call of the whole package)."""
    flat = [t for demo in demos for t in demo.inputs]
    model = aoti.Bundle([demo.module for demo in demos], [len(demo.inputs) for demo in demos])
    start = time.perf_counter()
    package = aoti.compile_package(model, flat, tmp / f"model_{device.type}.pt2")
    compile_s = time.perf_counter() - start
    inputs, output = tmp / "aoti_inputs.pt", tmp / "aoti_out.pt"
    aoti.save_inputs(flat, inputs)
    done = subprocess.run([runner, package, "--inputs", str(inputs), "--device", str(device), "--repeats", "20",
                           "--output", str(output)], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return torch.load(output), compile_s, report["median_ms"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runner", help="the customops_torchscript app (default: customops.runner_path('torchscript'))")
    p.add_argument("--aoti-runner", help="the customops_aoti app (default: customops.runner_path('aoti'))")
    p.add_argument("--no-aoti", action="store_true", help="skip the AOTInductor path (and its compile)")
    args = p.parse_args(argv)
    ts_runner = args.runner or runner_path("torchscript")
    aoti_runner = None if args.no_aoti else (args.aoti_runner or runner_path("aoti"))

    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    rows = [("op", "device", "path", "max abs error", "ms", "reference ms")]
    aoti_lines = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for device in devices:
            demos = [entry.demo(device) for entry in TABLE]
            aoti_outputs = [None] * len(demos)
            if aoti_runner:
                aoti_outputs, compile_s, run_ms = _run_aoti(aoti_runner, demos, device, Path(tmp))
                aoti_lines.append(f"AOTInductor on {device.type}: one package of all {len(demos)} ops compiled once "
                                  f"in {compile_s:.1f} s; then one call of the whole package from C++ takes "
                                  f"{run_ms:.4f} ms")
            for entry, demo, aoti_out in zip(TABLE, demos, aoti_outputs):
                expected = demo.reference(*(t.double() for t in demo.inputs))
                ref_ms = median_ms(lambda: demo.reference(*demo.inputs), device)
                compiled = torch.compile(demo.module, fullgraph=True, dynamic=True)
                paths = {
                    "python eager": lambda: (demo.module(*demo.inputs),
                                             median_ms(lambda: demo.module(*demo.inputs), device)),
                    "torch.compile": lambda: (compiled(*demo.inputs),
                                              median_ms(lambda: compiled(*demo.inputs), device)),
                    "TorchScript in C++": lambda: _run_cpp(ts_runner, demo.module, demo.inputs, device, Path(tmp)),
                }
                if aoti_out is not None:
                    # Timed as a whole package, below the table.
                    paths["AOTInductor in C++"] = lambda: (aoti_out, None)
                for path, run in paths.items():
                    with torch.no_grad():
                        out, ms = run()
                    err = (out.to(expected.device, torch.float64) - expected).abs().max().item()
                    ok &= err <= TOLERANCE
                    ms_text = "(package)" if ms is None else f"{ms:.4f}"
                    rows.append((entry.name, device.type, path, f"{err:.2e}", ms_text, f"{ref_ms:.4f}"))
    print(columns(rows))
    for line in aoti_lines:
        print(line)
    print("all paths agree with the reference" if ok else f"MISMATCH: some error is above {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
