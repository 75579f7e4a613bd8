"""A pointwise op's benchmark cases: its forward, and forward + backward, against its plain-PyTorch reference,
eager and compiled, on tensors of one shape per dtype. (No ``family`` here: each pointwise op has its own module,
which chooses its shapes and holds its reference.)"""

from __future__ import annotations

import functools
import math
from typing import Callable, Iterator, Sequence, Tuple

import torch

from ..table import Case, grad_of

# Elements per input where a pointwise op's module names no shape of its own: enough to time bandwidth.
CUDA_ELEMENTS, CPU_ELEMENTS = 64 * 2**20, 4 * 2**20


@functools.lru_cache(maxsize=None)
def compiled(reference: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """The reference torch.compile'd (once per reference)."""
    return torch.compile(reference, dynamic=False)


def default_shape(device: torch.device, quick: bool) -> Tuple[Tuple[int, ...], Tuple[torch.dtype, ...], str]:
    """A flat shape (a quarter of it for --quick on CPU, a sixteenth on CUDA), the dtypes timed, and its label."""
    if device.type == "cuda":
        n, dtypes = CUDA_ELEMENTS // (16 if quick else 1), (torch.float32, torch.float16, torch.bfloat16)
    else:
        n, dtypes = CPU_ELEMENTS // (4 if quick else 1), (torch.float32,)
    return (n,), dtypes, f"n={n // 2**20}M"


def cases(name: str, op: Callable[..., torch.Tensor], reference: Callable[..., torch.Tensor], inputs: Sequence[str],
          device: torch.device, shape: Tuple[int, ...], dtypes: Sequence[torch.dtype], label: str,
          args: tuple = ()) -> Iterator[Case]:
    """`inputs`: the op's tensors' names, each of `shape`; `args`: its scalar arguments' values, after them."""
    if args:
        op, reference = (functools.partial(lambda f, *xs: f(*xs, *args), f) for f in (op, reference))
        label = f"{label} {', '.join(map(repr, args))}"
    n = len(inputs)
    for dtype in dtypes:
        size = math.prod(shape) * torch.empty((), dtype=dtype).element_size()

        def setup(dtype=dtype):
            state = {x: torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for x in inputs}
            state["g"] = torch.randn_like(state[inputs[0]])
            return state

        def call(fn):
            return lambda s: fn(*(s[x].detach() for x in inputs))

        yield Case(name, f"forward {label}", dtype, setup, ours=call(op),
                   pytorch={"eager": call(reference), "compile": call(compiled(reference))},
                   bytes=(n + 1) * size)  # read the inputs, write y
        yield Case(name, f"fwd+bwd {label}", dtype, setup, ours=grad_of(op, *inputs),
                   pytorch={"eager": grad_of(reference, *inputs), "compile": grad_of(compiled(reference), *inputs)},
                   bytes=(3 * n + 2) * size)  # forward: the inputs, y; backward: g, the inputs, their gradients
