"""__op__ against the plain-PyTorch calls it replaces, eager and compiled."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo, grad_of


def __op___reference(x: torch.Tensor) -> torch.Tensor:
    # The plain-PyTorch calls the op replaces, as users write them.
    raise NotImplementedError("TODO(__op__): the reference")


_compiled_reference = torch.compile(__op___reference, dynamic=False)


def _cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shapes = ((4096, 64),)  # TODO(__op__): the sizes real models use (quick: smaller), per device
    for shape in shapes:
        def setup(shape=shape):
            x = torch.randn(shape, device=device, requires_grad=True)
            return {"x": x, "g": torch.randn(customops.__op__(x.detach().to("meta")).shape, device=device)}

        label = "x".join(map(str, shape))
        yield Case("__op__", f"forward {label}", torch.float32, setup,
                   ours=lambda s: customops.__op__(s["x"].detach()),
                   pytorch={"eager": lambda s: __op___reference(s["x"].detach()),
                            "compile": lambda s: _compiled_reference(s["x"].detach())},
                   bytes="TODO(__op__): the fewest bytes the forward moves (x read, the result written)")
        yield Case("__op__", f"forward+backward {label}", torch.float32, setup,
                   ours=grad_of(customops.__op__), pytorch={"eager": grad_of(__op___reference),
                                                           "compile": grad_of(_compiled_reference)},
                   bytes="TODO(__op__): the fewest bytes forward and backward move")


def _demo(device: torch.device) -> Demo:
    torch.manual_seed(0)
    return Demo(customops.__Op__(), (torch.randn(4096, 64, device=device),),  # TODO(__op__): a model's inputs
                __op___reference)


BENCH_OPS = [
    BenchOp("__op__", _cases, _demo),
]
