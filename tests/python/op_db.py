"""The operator table: one OpInfo per customops operator.

Adding an operator to the tests means adding one entry to OP_DB; every generic
test in test_ops.py then runs over it. Each entry gives:

- ``op``: the customops functional; ``ref``: the same maths in plain PyTorch,
- ``sample_inputs(device, dtype, requires_grad)``: inputs that must match the
  reference (include empty, non-contiguous and odd sizes),
- ``dynamic_samples(device, dtype)``: inputs of one structure in several sizes,
  for torch.compile(dynamic=True),
- ``error_inputs(device)``: bad inputs and the message they must raise,
- ``module(sample)``: a scriptable/exportable nn.Module and the tensors to call
  it with,
- dtypes per device and tolerances per dtype.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch import nn
from torch.testing import make_tensor

import customops

FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

# (rtol, atol) against a float64 reference evaluated on the same rounded inputs.
DEFAULT_TOLERANCES = {
    torch.float64: (1e-10, 1e-12),
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


@dataclass
class SampleInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""

    def tensors(self) -> list[torch.Tensor]:
        return [a for a in self.args if isinstance(a, torch.Tensor)]


@dataclass
class ErrorInput:
    sample: SampleInput
    match: str  # regex the RuntimeError's message must match
    error: type = RuntimeError
    backward: bool = False  # the sample is for the op's registered <name>_backward


@dataclass
class OpInfo:
    name: str  # torch.ops.customops.<name>
    op: Callable
    ref: Callable
    sample_inputs: Callable[[torch.device, torch.dtype, bool], Iterable[SampleInput]]
    dynamic_samples: Callable[[torch.device, torch.dtype], Iterable[SampleInput]]
    error_inputs: Callable[[torch.device], Iterable[ErrorInput]]
    module: Callable[[SampleInput], tuple[nn.Module, tuple]]
    # Arguments of <name>_backward for a forward sample and a gradient of its output.
    backward_args: Callable[[SampleInput, torch.Tensor], tuple]
    dtypes: dict[str, tuple] = field(default_factory=lambda: {"cpu": FLOATING, "cuda": FLOATING})
    tolerances: dict = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    supports_gradgrad: bool = True

    @property
    def overload(self) -> Any:
        return getattr(torch.ops.customops, self.name).default

    @property
    def backward_overload(self) -> Any:
        return getattr(torch.ops.customops, self.name + "_backward").default

    def __str__(self) -> str:  # pytest ids
        return self.name


# --- quick_gelu ---------------------------------------------------------------


def _quick_gelu_ref(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def _quick_gelu_samples(device, dtype, requires_grad):
    def t(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=-8, high=8, requires_grad=requires_grad, **kw)

    yield SampleInput((t(()),), name="scalar")
    yield SampleInput((t((0,)),), name="empty")
    yield SampleInput((t((5, 0, 3)),), name="empty_3d")
    yield SampleInput((t((1,)),), name="one")
    yield SampleInput((t((7,)),), name="odd")
    yield SampleInput((t((3, 5)),), name="matrix")
    yield SampleInput((t((4, 6, 5), noncontiguous=True),), name="noncontiguous")
    yield SampleInput((t((9, 11)).t(),), name="transposed")
    yield SampleInput((t((2, 3, 5, 7)).to(memory_format=torch.channels_last),), name="channels_last")
    base = make_tensor((12, 9), device=device, dtype=dtype, low=-8, high=8)
    yield SampleInput((base[1:, 1:].detach().requires_grad_(requires_grad),), name="offset_slice")
    yield SampleInput((t((1, 7)).expand(3, 7),), name="expanded")
    # Many threads' worth on CPU, many blocks on CUDA, with a ragged tail.
    yield SampleInput((t((70001,)),), name="large_odd")
    large = torch.tensor([-1e4, -200.0, -90.0, -30.0, 30.0, 90.0, 200.0, 1e4], dtype=torch.float64)
    large = large.clamp(torch.finfo(dtype).min, torch.finfo(dtype).max).to(device, dtype)
    yield SampleInput((large.requires_grad_(requires_grad),), name="large_magnitude")


def _quick_gelu_dynamic(device, dtype):
    for n in (5, 17, 1000):
        yield SampleInput((make_tensor((n, 3), device=device, dtype=dtype, low=-4, high=4),), name=f"n{n}")


def _quick_gelu_errors(device):
    yield ErrorInput(SampleInput((torch.ones(3, dtype=torch.int64, device=device),)),
                     r"expected x to be a floating-point tensor .* got Long")
    yield ErrorInput(SampleInput((torch.ones(3, dtype=torch.bool, device=device),)),
                     r"expected x to be a floating-point tensor .* got Bool")
    x = torch.randn(4, 3, device=device)
    yield ErrorInput(SampleInput((torch.randn(3, 4, device=device), x)),
                     r"expected grad_out to have the shape of x", backward=True)
    yield ErrorInput(SampleInput((x.double(), x)), r"expected grad_out to have the dtype of x", backward=True)
    yield ErrorInput(SampleInput((x.long(), x)), r"expected grad_out to be a floating-point tensor",
                     backward=True)
    yield ErrorInput(SampleInput((x, x.long())), r"expected x to be a floating-point tensor", backward=True)
    other = "cpu" if torch.device(device).type == "cuda" else ("cuda" if torch.cuda.is_available() else None)
    if other is not None:
        yield ErrorInput(SampleInput((x.to(other), x)), r"expected grad_out and x on the same device",
                         backward=True)


def _quick_gelu_module(sample):
    return customops.QuickGELU(), sample.args


QUICK_GELU = OpInfo(
    name="quick_gelu",
    op=customops.quick_gelu,
    ref=_quick_gelu_ref,
    sample_inputs=_quick_gelu_samples,
    dynamic_samples=_quick_gelu_dynamic,
    error_inputs=_quick_gelu_errors,
    module=_quick_gelu_module,
    backward_args=lambda sample, grad: (grad, sample.args[0]),
)


OP_DB: list[OpInfo] = [QUICK_GELU]
