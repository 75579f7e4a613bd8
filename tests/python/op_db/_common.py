"""What every family module of op_db shares: the OpInfo record and its parts, and helpers of more than one family.
The package's docstring (op_db/__init__.py) describes the fields."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

import torch
from torch import nn

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
    # The overload of customops::<op> (and of <op>_backward) the sample calls: OpInfo.overload_of.
    overload: str = "default"
    # Paths that cannot run this sample (a test's name for its path -> why), e.g. "gradgrad" for a form
    # differentiable once: those tests leave the sample out, the reason in the table.
    skips: dict = field(default_factory=dict)

    def tensors(self) -> list[torch.Tensor]:
        return [a for a in self.args if isinstance(a, torch.Tensor)]


@dataclass
class ErrorInput:
    sample: SampleInput
    match: str  # regex the RuntimeError's message must match
    error: type = RuntimeError
    backward: bool = False  # the sample is for the op's registered <name>_backward


# One DTensor sharding case: (name, overload, args, one placement per tensor argument, the outputs' placements).
ShardingCase = tuple


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
    # Required, without defaults: a new op without them fails at import, not by being silently left out of the
    # property, fuzz, ONNX or sharding tests.
    cases: Callable[[str], Any]  # device -> hypothesis SearchStrategy of strategies.Case
    property_cost: float
    fuzz_call: Callable[[random.Random, bool, str, torch.dtype], list]
    onnx_nodes: Callable[[SampleInput], list[tuple[str, dict]]]
    sharding_cases: Callable[[Callable[..., torch.Tensor]], Iterable[ShardingCase]]
    dtypes: dict[str, tuple] = field(default_factory=lambda: {"cpu": FLOATING, "cuda": FLOATING})
    tolerances: dict = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    supports_gradgrad: bool = True
    autocast: str = "input_dtype"  # or "lower_precision" (convolutions), "promote" (the widest input dtype, as mul)
    autocast_samples: Callable[[torch.device, torch.dtype, bool], Iterable[SampleInput]] = lambda *_: ()
    keeps_memory_format: bool = False
    keeps_dense_strides: bool = False
    property_tolerance: Optional[Callable[[Any, torch.dtype, tuple[float, float]], tuple[float, float]]] = None
    gradient_term_scales: Optional[Callable[[list, torch.Tensor], list]] = None
    fuzz_wrapper_args: Optional[Callable[[random.Random, list], None]] = None
    # The other overloads the fuzzer calls: overload name -> a fuzz_call of customops::<name>.<overload> (and of
    # <name>_backward.<overload> where that exists), every argument in schema order, keyword-only ones included.
    fuzz_overloads: dict = field(default_factory=dict)
    cuda_concurrent_bitwise: bool = True
    converts_to_tflite: bool = True
    takes_image: bool = False
    atomic_backward_decomposition: bool = False
    # For samples of an overload other than .default: the (args, kwargs) of <name>_backward.<overload> for the
    # sample and a gradient of its output.
    overload_backward_args: Optional[Callable[[SampleInput, torch.Tensor], tuple[tuple, dict]]] = None

    @property
    def overload(self) -> Any:
        return getattr(torch.ops.customops, self.name).default

    @property
    def backward_overload(self) -> Any:
        return getattr(torch.ops.customops, self.name + "_backward").default

    def overload_of(self, sample: SampleInput) -> Any:
        """The overload the sample calls (torch.ops.customops.<name>.<sample.overload>)."""
        return getattr(getattr(torch.ops.customops, self.name), sample.overload)

    def backward_call(self, sample: SampleInput, grad: torch.Tensor) -> tuple[Any, tuple, dict]:
        """(the backward overload, its args, its kwargs) for the sample and a gradient of its output."""
        if sample.overload == "default":
            return self.backward_overload, tuple(self.backward_args(sample, grad)), {}
        args, kwargs = self.overload_backward_args(sample, grad)
        return getattr(getattr(torch.ops.customops, self.name + "_backward"), sample.overload), args, kwargs

    def __str__(self) -> str:  # pytest ids
        return self.name


def _other_device(device) -> str | None:
    """A device other than `device` for mixed-device error inputs, if there is one."""
    if torch.device(device).type == "cuda":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None


class SideBySide(nn.Module):
    """The modules of several samples side by side (``op.module(sample)`` for each): forward takes all their
    inputs, returns one output each. One export or conversion then covers all of an op's samples."""

    def __init__(self, built: list) -> None:
        super().__init__()
        self.parts = nn.ModuleList(module.eval() for module, _ in built)
        self.arities = [len(args) for _, args in built]

    def forward(self, *inputs):
        outputs, i = [], 0
        for part, n in zip(self.parts, self.arities):
            outputs.append(part(*inputs[i:i + n]))
            i += n
        return tuple(outputs)


def _low_precision_first_input(make_samples, count=3):
    """The first `count` samples with their first tensor in the low dtype."""

    def samples(device, low, requires_grad):
        for sample in list(make_samples(device, low, requires_grad))[:count]:
            yield SampleInput(sample.args, sample.kwargs, f"{sample.name}_{low}")

    return samples


def _as_pair(v) -> list:
    """An (h, w) argument, given as one int or a pair, as the list of two an ONNX attribute holds."""
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


def _placements():
    """(Shard, Replicate(), Partial()) for the sharding cases; imported only when they are built, as
    torch.distributed may be missing from a build that runs every other test."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    return Shard, Replicate(), Partial()
