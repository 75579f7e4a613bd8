"""The benchmark table: one BenchOp per operator, from the family modules of customops.benchmark.ops.

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


def grad_of(fn: Callable[..., torch.Tensor], *inputs: str) -> Callable[[State], object]:
    """forward + backward: y = fn(*inputs) (the state's "x" by default); dL/d(inputs) for the upstream gradient g."""
    names = inputs or ("x",)
    return lambda s: torch.autograd.grad(fn(*(s[n] for n in names)), [s[n] for n in names], s["g"])


def _table() -> list[BenchOp]:
    from .. import _families
    from . import ops

    return [entry for family in _families.family_modules(ops.__name__, ops.__path__) for entry in family.BENCH_OPS]


def __getattr__(name: str):
    # TABLE is gathered when first asked for: the family modules import this one, and one of them imported first
    # (the tests take their references from them) must find it whole.
    if name == "TABLE":
        globals()["TABLE"] = _table()
        return globals()["TABLE"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
