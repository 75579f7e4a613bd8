"""Train a small segmentation model whose decoder upsamples like TF1's
resize_bilinear (coordinate_mode="asymmetric"), export it to ONNX, run it in
ONNX Runtime, and print the parity report.

    python examples/deploy/train_export.py [--steps 25] [--out DIR]

The same model is a MODEL_OR_FILE for the parity command:

    python -m customops.deploy.check examples/deploy/train_export.py:build

Needs ``pip install 'customops[onnx]'``. Runs on CPU in seconds.
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

import customops

IMAGE = 32


class TinySegmenter(nn.Module):
    """An encoder of strided depthwise-separable blocks and a decoder that
    upsamples back with the convention of the runtime the model will ship to
    (asymmetric: TF-Lite RESIZE_BILINEAR with both flags off)."""

    def __init__(self, classes: int = 2, coordinate_mode: str = "asymmetric") -> None:
        super().__init__()

        def down(cin, cout):
            return nn.Sequential(customops.DepthwiseConv2d(cin, cin, 3, stride=2, padding=1),
                                 customops.Conv2d(cin, cout, 1), customops.QuickGELU())

        self.stem = nn.Sequential(customops.Conv2d(3, 16, 3, padding=1), customops.QuickGELU())
        self.down1, self.down2 = down(16, 32), down(32, 48)
        self.up = customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode=coordinate_mode)
        self.fuse1 = customops.Conv2d(48 + 32, 32, 3, padding=1)
        self.fuse2 = customops.Conv2d(32 + 16, 16, 3, padding=1)
        self.act = customops.QuickGELU()
        self.classify = customops.Conv2d(16, classes, 1)

    def forward(self, x):
        s1 = self.stem(x)
        s2 = self.down1(s1)
        s3 = self.down2(s2)
        y = self.act(self.fuse1(torch.cat([self.up(s3), s2], 1)))
        y = self.act(self.fuse2(torch.cat([self.up(y), s1], 1)))
        return self.classify(y)


class _Interpolate(nn.Module):
    def __init__(self, align_corners: bool) -> None:
        super().__init__()
        self.align_corners = align_corners

    def forward(self, x):
        return nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=self.align_corners)


class _QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


def plain_twin(model: nn.Module) -> nn.Module:
    """The same network and weights in torch.nn layers: nn.Conv2d, QuickGELU written as x * sigmoid(1.702 x) and
    F.interpolate (align_corners where the model's resize has it, else half_pixel: PyTorch has no asymmetric
    mode), the baseline of int8_error.py and to_executorch.py."""
    plain = copy.deepcopy(model)
    for child in list(plain.modules()):
        for attr, sub in list(child.named_children()):
            if isinstance(sub, customops.QuickGELU):
                setattr(child, attr, _QuickGELU())
            elif isinstance(sub, customops.UpsampleBilinear2d):
                setattr(child, attr, _Interpolate(sub.coordinate_mode == "align_corners"))
            elif isinstance(sub, (customops.Conv2d, customops.DepthwiseConv2d)):
                conv = nn.Conv2d(sub.in_channels, sub.out_channels, sub.kernel_size, sub.stride, sub.padding,
                                 sub.dilation, sub.groups, bias=sub.bias is not None)
                conv.load_state_dict(sub.state_dict())
                setattr(child, attr, conv)
    return plain.eval()


def synthetic_batch(n: int, generator: torch.Generator):
    """Images holding a bright disc on noise; the label marks the disc."""
    ys, xs = torch.meshgrid(torch.arange(IMAGE), torch.arange(IMAGE), indexing="ij")
    centre = torch.rand(n, 2, generator=generator) * (IMAGE - 12) + 6
    radius = torch.rand(n, generator=generator) * 5 + 3
    inside = ((ys - centre[:, 0, None, None]) ** 2 + (xs - centre[:, 1, None, None]) ** 2) < radius[:, None, None] ** 2
    images = torch.randn(n, 3, IMAGE, IMAGE, generator=generator) * 0.3 + inside[:, None].float()
    return images, inside.long()


def train(steps: int = 25, seed: int = 0) -> TinySegmenter:
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = TinySegmenter()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        images, labels = synthetic_batch(8, generator)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}")
    return model.eval()


def build(steps: int = 25):
    """(trained model, example input): what ``customops.deploy.check`` takes."""
    model = train(steps)
    images, _ = synthetic_batch(4, torch.Generator().manual_seed(1))
    return model, (images,)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25, help="training steps")
    parser.add_argument("--out", type=Path, help="where to write model.onnx (default: a temporary directory)")
    options = parser.parse_args()

    start = time.perf_counter()
    model, (images,) = build(options.steps)
    print(f"trained {options.steps} steps in {time.perf_counter() - start:.1f} s")

    out = options.out or Path(tempfile.mkdtemp(prefix="customops-deploy-"))
    out.mkdir(parents=True, exist_ok=True)
    # A plain export: importing customops is all the exporter needs to know the ops.
    program = torch.onnx.export(model, (images,), dynamo=True, verbose=False,
                                dynamic_shapes=({0: torch.export.Dim("batch")},))
    path = out / "model.onnx"
    program.save(str(path))
    print(f"exported {path}")

    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    batch, _ = synthetic_batch(7, torch.Generator().manual_seed(2))  # another batch size: the batch is dynamic
    (logits,) = session.run(None, {session.get_inputs()[0].name: batch.numpy()})
    with torch.no_grad():
        expected = model(batch)
    agree = (torch.from_numpy(logits).argmax(1) == expected.argmax(1)).float().mean().item()
    print(f"ONNX Runtime, batch {len(batch)}: max |diff| {(torch.from_numpy(logits) - expected).abs().max():.2e}, "
          f"same class for {agree:.1%} of pixels")

    print(customops.deploy.check(model, (images,)))


if __name__ == "__main__":
    main()
