"""How much a full-integer (int8) TF-Lite model of a network with customops
layers differs from float32 PyTorch, beside the same network of plain PyTorch
layers converted the same way (onnx2tf, per-channel int8, calibrated on the
same representative data). Prints a Markdown table (docs/deploy.md has it).

    python -m customops.deploy.tflite_env      # once
    python examples/deploy/int8_error.py

The networks: the segmentation model of train_export.py (trained a few steps;
its plain twin uses nn.Conv2d, QuickGELU written as x * sigmoid(1.702 x)
and F.interpolate, hence the half_pixel mode on both sides) and torchvision's
MobileNetV2 (random weights, 10 classes, 96x96) before and after
customops.convert.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch
from torch import nn

import customops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_export import build, plain_twin, synthetic_batch  # noqa: E402


def _error(model, args, calibration) -> float:
    report = customops.deploy.check(model, args, runtime="tflite", atol=float("inf"), tflite_resolvers=("AUTO",),
                                    int8_calibration=calibration)
    return report.int8_outputs[0]


def main() -> None:
    import torchvision

    rows = []
    segmenter, (images,) = build(25)
    segmenter.up.coordinate_mode = "half_pixel"
    calibration, _ = synthetic_batch(32, torch.Generator().manual_seed(3))
    rows.append(("segmentation model (train_export.py), 4x3x32x32", _error(segmenter, (images,), calibration),
                 _error(plain_twin(segmenter), (images,), calibration)))

    torch.manual_seed(0)
    mobilenet = torchvision.models.mobilenet_v2(num_classes=10).eval()
    x = torch.randn(1, 3, 96, 96)
    calibration = torch.randn(32, 3, 96, 96)
    rows.append(("MobileNetV2 (random weights), 1x3x96x96",
                 _error(customops.convert(copy.deepcopy(mobilenet)).eval(), (x,), calibration),
                 _error(mobilenet, (x,), calibration)))

    print("| network | customops layers | torch.nn layers |")
    print("| --- | --- | --- |")
    for name, ours, theirs in rows:
        print(f"| {name} | {ours:.2e} | {theirs:.2e} |")


if __name__ == "__main__":
    main()
