"""__op__ against the plain-PyTorch calls it replaces, eager and compiled."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo, grad_of


def __op___reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # The plain-PyTorch calls the op replaces, as users write them.
    raise NotImplementedError("TODO(__op__): the reference")


_compiled_reference = torch.compile(__op___reference, dynamic=False)


def _cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shapes = (((4096, 64), (4096, 64)),)  # TODO(__op__): the sizes real models use (quick: smaller), per device
    for a_shape, b_shape in shapes:
        def setup(a_shape=a_shape, b_shape=b_shape):
            a = torch.randn(a_shape, device=device, requires_grad=True)
            b = torch.randn(b_shape, device=device, requires_grad=True)
            out = customops.__op__(a.detach().to("meta"), b.detach().to("meta"))
            return {"a": a, "b": b, "g": torch.randn(out.shape, device=device)}

        label = f"{'x'.join(map(str, a_shape))} {'x'.join(map(str, b_shape))}"
        yield Case("__op__", f"forward {label}", torch.float32, setup,
                   ours=lambda s: customops.__op__(s["a"].detach(), s["b"].detach()),
                   pytorch={"eager": lambda s: __op___reference(s["a"].detach(), s["b"].detach()),
                            "compile": lambda s: _compiled_reference(s["a"].detach(), s["b"].detach())},
                   bytes="TODO(__op__): the fewest bytes the forward moves (a and b read, the result written)")
        yield Case("__op__", f"forward+backward {label}", torch.float32, setup,
                   ours=grad_of(customops.__op__, "a", "b"),
                   pytorch={"eager": grad_of(__op___reference, "a", "b"),
                            "compile": grad_of(_compiled_reference, "a", "b")},
                   bytes="TODO(__op__): the fewest bytes forward and backward move")


def _demo(device: torch.device) -> Demo:
    torch.manual_seed(0)
    inputs = (torch.randn(4096, 64, device=device), torch.randn(4096, 64, device=device))  # TODO(__op__): a model's
    return Demo(customops.__Op__(), inputs, __op___reference)


BENCH_OPS = [
    BenchOp("__op__", _cases, _demo),
]
