"""Train the small segmentation model of train_export.py (its decoder upsamples
with TF1's convention, coordinate_mode="asymmetric"), convert it to a TF-Lite
model, run that in the LiteRT interpreter with each of its kernel options, and
print the parity report: per customops op, the largest difference from eager
PyTorch, and the TF-Lite operators it became.

    python -m customops.deploy.tflite_env        # once: onnx2tf, TensorFlow, LiteRT
    python examples/deploy/to_tflite.py [--steps 25] [--out DIR] [--int8]
    python examples/deploy/to_tflite.py --converter litert-torch   # torch 2.11-2.14 with litert-torch

With --int8, a full-integer model is converted as well, calibrated on
synthetic images, and its error relative to the output's range is printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

import customops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_export import build, synthetic_batch  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25, help="training steps")
    parser.add_argument("--converter", choices=("onnx2tf", "litert-torch"), default="onnx2tf")
    parser.add_argument("--int8", action="store_true", help="also convert and run a full-integer model")
    parser.add_argument("--out", type=Path, help="where to write model.tflite (default: a temporary directory)")
    options = parser.parse_args()

    start = time.perf_counter()
    model, (images,) = build(options.steps)
    print(f"trained {options.steps} steps in {time.perf_counter() - start:.1f} s")

    out = options.out or Path(tempfile.mkdtemp(prefix="customops-tflite-"))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "model.tflite"
    calibration = synthetic_batch(32, torch.Generator().manual_seed(3))[0] if options.int8 else None
    start = time.perf_counter()
    report = customops.deploy.check(model, (images,), runtime="tflite", converter=options.converter,
                                    save_tflite=str(path), int8_calibration=calibration)
    print(f"converted and checked in {time.perf_counter() - start:.1f} s; wrote {path}")
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
