"""What the family modules of customops.func share: the routing of an operator
to its autograd.Function while a torch.func transform runs, and vmap helpers.

Why a second autograd implementation beside the C++ one: functorch refuses C++
``torch::autograd::Function`` ("cannot use C++ torch::autograd::Function with
functorch transforms"), and a Python ``autograd.Function`` is the only kind it
can see through (its grad, jvp and vmap rules live in
torch/_functorch/autograd_function.py). The C++ Autograd kernels stay the only
autograd of plain eager mode, TorchScript and C++ programs.

Why the FuncTorchDynamicLayerFrontMode key, not Autograd: that key is in the
thread's dispatch keys exactly while a torch.func transform is active, so a
kernel there runs only under transforms and leaves every other call to the
C++ kernels. Overriding the Autograd key instead would replace the C++ autograd
for all Python callers, print PyTorch's "Overriding a previously registered
kernel" warning, and still fail: functorch's key is excluded inside Autograd
kernels, so an autograd.Function applied there never reaches functorch's rules
(torch.library.register_autograd has that limitation too).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch
from torch._C._functorch import TransformType
from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter
from torch._subclasses.functional_tensor import FunctorchFunctionalizeAPI

ops = torch.ops.customops

_KEY = "FuncTorchDynamicLayerFrontMode"
_LIBRARY = torch.library.Library("customops", "IMPL", _KEY)


def in_schema_order(schema, args: tuple, kwargs: dict) -> tuple:
    """A kernel's arguments, every one positionally in schema order: the dispatcher drops trailing arguments that
    equal their defaults and passes keyword-only ones by name."""
    return (*args, *(kwargs.get(a.name, a.default_value) for a in schema[len(args):]))


def register(name: str, function: type[torch.autograd.Function]) -> None:
    """Routes customops::<name> (``op`` or ``op.overload``) to ``function`` while a torch.func transform is
    active."""
    packet, _, overload = name.partition(".")
    op = getattr(getattr(ops, packet), overload or "default")
    schema = op._schema.arguments
    keyword = [a.name for a in schema if a.kwarg_only]

    def kernel(*args, **kwargs):
        args = in_schema_order(schema, args, kwargs)
        interpreter = retrieve_current_functorch_interpreter()
        if interpreter.key() == TransformType.Functionalize:
            # functorch has no functionalize rule for autograd.Function; the ops are
            # functional, so the next level down can run them as they are.
            api = FunctorchFunctionalizeAPI(interpreter)
            unwrapped = api.unwrap_tensors(args)
            with api.redispatch_to_next():
                out = op(*unwrapped[:len(schema) - len(keyword)],
                         **dict(zip(keyword, unwrapped[len(schema) - len(keyword):])))
            return api.wrap_tensors(out)
        return function.apply(*args)

    _LIBRARY.impl(name, kernel, _KEY)


def below_autograd():
    """For a Function's forward, which runs with no transform left: the kernels
    without the C++ autograd (the Function records the graph itself)."""
    return torch._C._AutoDispatchBelowAutograd()


def batch_first(x: Optional[torch.Tensor], bdim: Optional[int], batch_size: int) -> Optional[torch.Tensor]:
    """x with its vmapped dimension first; an unbatched x expanded (a view) to the batch."""
    if x is None:
        return None
    if bdim is None:
        return x.expand(batch_size, *x.shape)
    return x.movedim(bdim, 0)


def fold_into_batch(op: Callable, x: torch.Tensor, rank: int, unbatched: bool, *args):
    """vmap rule of an op that treats the images (points, ...) of its batch
    dimension independently: the vmapped dimension joins that batch.

    ``x`` has its vmapped dimension first; ``rank`` is the op's batched input
    rank; ``unbatched`` whether the op also takes inputs without the batch
    dimension (then the vmapped dimension is their batch). An input of another
    rank goes to the op as one sample, so that the op raises its own error.
    """
    logical = x.dim() - 1
    if unbatched and logical == rank - 1:
        return op(x, *args), 0
    if logical != rank:
        op(x[0], *args)  # raises the op's message for this rank
        raise RuntimeError(f"customops.func: unexpected {logical}-D input")  # unreachable for a checking op
    b, n = x.shape[:2]
    return op(x.flatten(0, 1), *args).unflatten(0, (b, n)), 0


def linear_function(name: str, op: Callable, adjoint: Callable, rank: int, unbatched: bool
                    ) -> type[torch.autograd.Function]:
    """The autograd.Function of a linear op ``y = op(x, *params)`` whose only
    tensor is x: the gradient is ``adjoint(g, x.shape, *params)``, the tangent
    ``op(t, *params)``, and vmap folds the vmapped dimension into the batch
    (see fold_into_batch for rank and unbatched)."""

    def forward(x, *params):
        with below_autograd():
            return op(x, *params)

    def setup_context(ctx, inputs, output):
        ctx.shape, ctx.params = inputs[0].shape, inputs[1:]

    def backward(ctx, grad):
        return (adjoint(grad, ctx.shape, *ctx.params), *(None for _ in ctx.params))

    def jvp(ctx, tangent, *_):
        return op(tangent, *ctx.params)

    def vmap(info, in_dims, x, *params):
        return fold_into_batch(op, x.movedim(in_dims[0], 0), rank, unbatched, *params)

    return type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward), "jvp": staticmethod(jvp), "vmap": staticmethod(vmap),
    })


def slice_by_slice(op: Callable, info, in_dims, *args):
    """vmap rule that calls the op once per slice of the vmapped dimension and stacks the results (a result of
    several tensors, None for those not asked for, stacked one by one): right for any op. An op with a batch
    dimension of its own takes the vmapped one into it in one call instead (fold_into_batch)."""

    def sliced(i):
        return (a if d is None else a.select(d, i) for a, d in zip(args, in_dims))

    results = [op(*sliced(i)) for i in range(info.batch_size)]
    if not isinstance(results[0], (tuple, list)):
        return torch.stack(results), 0
    stacked = tuple(None if r is None else torch.stack([result[k] for result in results])
                    for k, r in enumerate(results[0]))
    return stacked, tuple(None if s is None else 0 for s in stacked)


def add(total: Optional[torch.Tensor], term: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """total + term where None stands for zero (an input without a gradient or tangent)."""
    if term is None:
        return total
    return term if total is None else total + term


def mask_of(ctx, count: int) -> Sequence[bool]:
    return [bool(ctx.needs_input_grad[i]) for i in range(count)]


# The rules of convolution-shaped ops (conv2d, depthwise_conv2d, causal_conv1d): y = conv(x, w) + b is linear in
# each of x, w and b, and its backward op (gx, gw, gb) = (Gx(g, w), Gw(g, x), sum(g)) is bilinear, with Gx and Gw
# the adjoints of the convolution in x and in w. `forward(x, w, b)` and `backward(g, x, w, mask)` call the op pair
# (the window arguments bound); `spatial` counts the dimensions after the channels, over which a bias broadcasts.

def _broadcast_bias(b: torch.Tensor, shape, spatial: int) -> torch.Tensor:
    return b.view(-1, *([1] * spatial)).expand(shape)


def conv_tangent(forward: Callable, x, w, tx, tw, tb, out_shape, spatial: int) -> torch.Tensor:
    """The forward op's tangent: conv(tx, w) + conv(x, tw) + tb."""
    out = None if tx is None else forward(tx, w, tb)
    out = add(out, None if tw is None else forward(x, tw, None if tx is not None else tb))
    return out if out is not None else _broadcast_bias(tb, out_shape, spatial)  # only the bias moves


def conv_backward_grads(forward: Callable, backward: Callable, need: Sequence[bool], g, x, w, ggx, ggw, ggb,
                        spatial: int):
    """The backward op's gradients for upstream gradients ggx, ggw, ggb (of gx, gw, gb):
    d g = conv(ggx, w) + conv(x, ggw) + ggb,  d x = Gx(g, ggw),  d w = Gw(g, ggx)."""
    dg = dx = dw = None
    if need[0]:
        if ggx is not None:
            dg = forward(ggx, w, ggb)
        elif ggb is not None:
            dg = _broadcast_bias(ggb, g.shape, spatial)
        dg = add(dg, None if ggw is None else forward(x, ggw, None))
    if need[1] and ggw is not None:
        dx = backward(g, x, ggw, (True, False, False))[0]
    if need[2] and ggx is not None:
        dw = backward(g, ggx, w, (False, True, False))[1]
    return dg, dx, dw


def conv_backward_tangents(backward: Callable, mask: Sequence[bool], g, x, w, tg, tx, tw):
    """The backward op's tangents, bilinear: t(gx) = Gx(tg, w) + Gx(g, tw), t(gw) = Gw(tg, x) + Gw(g, tx),
    t(gb) = sum(tg); a gradient the mask asks for whose inputs have no tangent does not move (zeros)."""
    mask = list(mask)
    tgx, tgw, tgb = backward(tg, x, w, mask) if tg is not None else (None, None, None)
    if mask[0] and tw is not None:
        tgx = add(tgx, backward(g, x, tw, (True, False, False))[0])
    if mask[1] and tx is not None:
        tgw = add(tgw, backward(g, tx, w, (False, True, False))[1])
    zeros = (torch.zeros_like(x), torch.zeros_like(w), g.new_zeros(w.shape[0]))
    return tuple(None if not m else (t if t is not None else z) for m, t, z in zip(mask, (tgx, tgw, tgb), zeros))
