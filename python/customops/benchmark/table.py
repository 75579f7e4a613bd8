"""The benchmark table: one BenchOp per operator.

Each case gives a setup (inputs on a device), our call, the plain-PyTorch calls
it replaces (eager and torch.compile'd), and the fewest bytes the work must move
through memory, from which the achieved share of copy bandwidth follows. The
demo (python -m customops.demo) uses `demo` of each entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import nn

import customops

State = dict


@dataclass
class Case:
    op: str
    name: str
    dtype: torch.dtype
    setup: Callable[[], State]
    ours: Callable[[State], object]
    pytorch: dict[str, Callable[[State], object]]  # baseline name -> call
    bytes: int  # fewest bytes moved through memory


@dataclass
class Demo:
    module: nn.Module  # scriptable, calls the op
    inputs: tuple
    reference: Callable[..., torch.Tensor]  # plain PyTorch, same signature


@dataclass
class BenchOp:
    name: str
    cases: Callable[[torch.device, bool], Iterator[Case]]  # (device, quick)
    demo: Callable[[torch.device], Demo]


def _grad_of(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[State], object]:
    """forward + backward: y = fn(x); dL/dx for the upstream gradient g."""
    return lambda s: torch.autograd.grad(fn(s["x"]), s["x"], s["g"])


# --- quick_gelu ---------------------------------------------------------------


def quick_gelu_reference(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


_compiled_quick_gelu_reference = torch.compile(quick_gelu_reference, dynamic=False)


def _quick_gelu_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        n = (4 if quick else 64) * 2**20
        dtypes = (torch.float32, torch.float16, torch.bfloat16)
    else:
        n = (1 if quick else 4) * 2**20
        dtypes = (torch.float32,)
    for dtype in dtypes:
        size = n * torch.empty((), dtype=dtype).element_size()

        def setup(dtype=dtype):
            x = torch.randn(n, device=device, dtype=dtype, requires_grad=True)
            return {"x": x, "g": torch.randn_like(x)}

        label = f"n={n // 2**20}M"
        yield Case("quick_gelu", f"forward {label}", dtype, setup,
                   ours=lambda s: customops.quick_gelu(s["x"].detach()),
                   pytorch={"eager": lambda s: quick_gelu_reference(s["x"].detach()),
                            "compile": lambda s: _compiled_quick_gelu_reference(s["x"].detach())},
                   bytes=2 * size)  # read x, write y
        yield Case("quick_gelu", f"fwd+bwd {label}", dtype, setup,
                   ours=_grad_of(customops.quick_gelu),
                   pytorch={"eager": _grad_of(quick_gelu_reference),
                            "compile": _grad_of(_compiled_quick_gelu_reference)},
                   bytes=5 * size)  # forward: x, y; backward: g, x, dx


def _quick_gelu_demo(device: torch.device) -> Demo:
    return Demo(customops.QuickGELU(), (torch.randn(64, 1024, device=device) * 4,), quick_gelu_reference)


# --- im2col / col2im ------------------------------------------------------------

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


TABLE: list[BenchOp] = [
    BenchOp("quick_gelu", _quick_gelu_cases, _quick_gelu_demo),
    BenchOp("im2col", _im2col_cases, _im2col_demo),
    BenchOp("col2im", _col2im_cases, _col2im_demo),
]
