"""upsample_bilinear2d against F.interpolate(mode="bilinear")."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo


def _upsample_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        shape = ((4 if quick else 16), 64, 128, 128)
        dtypes = (torch.float32, torch.float16)
    else:
        shape = ((2 if quick else 8), 32, 64, 64)
        dtypes = (torch.float32,)
    size = [2 * shape[2], 2 * shape[3]]
    label = f"x2 {'x'.join(map(str, shape))}"
    for dtype in dtypes:
        def setup(dtype=dtype):
            x = torch.randn(shape, device=device, dtype=dtype)
            return {"x": x, "g": torch.randn(*shape[:2], *size, device=device, dtype=dtype)}

        numel = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
        yield Case("upsample_bilinear2d", f"forward {label}", dtype, setup,
                   ours=lambda s: customops.upsample_bilinear2d(s["x"], size),
                   pytorch={"F.interpolate": lambda s: torch.nn.functional.interpolate(
                       s["x"], size=size, mode="bilinear", align_corners=False)},
                   bytes=5 * numel)  # read x, write 4x as many outputs
        yield Case("upsample_bilinear2d", f"backward {label}", dtype, setup,
                   ours=lambda s: torch.ops.customops.upsample_bilinear2d_backward(s["g"], shape[2:], "half_pixel"),
                   pytorch={"aten": lambda s: torch.ops.aten.upsample_bilinear2d_backward(
                       s["g"], size, list(shape), False)},
                   bytes=5 * numel)  # read grad_out, write grad_input


def _upsample_demo(device: torch.device) -> Demo:
    m = customops.UpsampleBilinear2d(size=(37, 29))
    return Demo(m, (torch.randn(2, 8, 16, 12, device=device),),
                lambda x: torch.nn.functional.interpolate(x, size=(37, 29), mode="bilinear", align_corners=False))


BENCH_OPS = [
    BenchOp('upsample_bilinear2d', _upsample_cases, _upsample_demo),
]
