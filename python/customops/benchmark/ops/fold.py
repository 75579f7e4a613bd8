"""im2col and col2im against F.unfold and F.fold."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo


_WINDOW = {"kernel_size": 3, "padding": 1, "stride": 1, "dilation": 1}


def _image_shape(device: torch.device, quick: bool) -> tuple:
    if device.type == "cuda":
        return (8 if quick else 32, 64, 56, 56)
    return (2 if quick else 8, 32, 56, 56)


def _fold_dtypes(device: torch.device) -> tuple:
    return (torch.float32, torch.float16) if device.type == "cuda" else (torch.float32,)


def _im2col_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shape = _image_shape(device, quick)
    for dtype in _fold_dtypes(device):
        def setup(dtype=dtype):
            return {"x": torch.randn(shape, device=device, dtype=dtype)}

        element = torch.empty((), dtype=dtype).element_size()
        numel = torch.Size(shape).numel()
        yield Case("im2col", f"{'x'.join(map(str, shape))} k3 p1", dtype, setup,
                   ours=lambda s: customops.im2col(s["x"], **_WINDOW),
                   pytorch={"eager": lambda s: torch.nn.functional.unfold(s["x"], **_WINDOW)},
                   bytes=(1 + 9) * numel * element)  # read the image once, write 9 columns per pixel


def _col2im_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shape = _image_shape(device, quick)
    n, c, h, w = shape
    for dtype in _fold_dtypes(device):
        def setup(dtype=dtype):
            return {"cols": torch.randn(n, c * 9, h * w, device=device, dtype=dtype)}

        element = torch.empty((), dtype=dtype).element_size()
        yield Case("col2im", f"{'x'.join(map(str, shape))} k3 p1", dtype, setup,
                   ours=lambda s: customops.col2im(s["cols"], (h, w), **_WINDOW),
                   pytorch={"eager": lambda s: torch.nn.functional.fold(s["cols"], (h, w), **_WINDOW)},
                   bytes=(9 + 1) * n * c * h * w * element)  # read the columns, write the image


def _im2col_demo(device: torch.device) -> Demo:
    return Demo(customops.Im2col(3, padding=1, stride=2), (torch.randn(2, 8, 17, 15, device=device),),
                lambda x: torch.nn.functional.unfold(x, 3, padding=1, stride=2))


def _col2im_demo(device: torch.device) -> Demo:
    return Demo(customops.Col2im((17, 15), 3, padding=1, stride=2), (torch.randn(2, 72, 72, device=device),),
                lambda c: torch.nn.functional.fold(c, (17, 15), 3, padding=1, stride=2))


BENCH_OPS = [
    BenchOp('im2col', _im2col_cases, _im2col_demo),
    BenchOp('col2im', _col2im_cases, _col2im_demo),
]
