"""torch.func support of causal_conv1d and its backward, and vmap of its decoding step.

The op is linear in each of x, weight and bias, so its tangent is the op again; its backward op is bilinear, so
that op's gradient and tangent are the op and the backward op (registration/causal_conv1d.cpp). vmap: with one
filter for the whole vmapped batch, the vmapped dimension joins B; per-sample filters (and the backward op's
weight gradient, which sums over B) put it into the channels instead, each sample's channels with their own
filters, in one call.
"""

from __future__ import annotations

import torch
from torch._functorch.autograd_function import custom_function_call_vmap_helper
from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

from ._common import (batch_first, below_autograd, conv_backward_grads, conv_backward_tangents, conv_tangent,
                      in_schema_order, mask_of, ops, register, slice_by_slice)


def _to_channels(t):
    """(n, B, C, L) -> (B, n*C, L): the vmapped batch becomes channels."""
    return t.movedim(0, 1).flatten(1, 2)


def _from_channels(t, n):
    """(B, n*C, L) -> (n, B, C, L)."""
    return t.unflatten(1, (n, -1)).movedim(1, 0)


def _rank_checked(x, *args):
    if x.dim() != 4:  # one sample to the op, which raises its own message for this rank
        ops.causal_conv1d(x[0], *args)
    return x


class CausalConv1d(torch.autograd.Function):
    @staticmethod
    def forward(x, weight, bias):
        with below_autograd():
            return ops.causal_conv1d(x, weight, bias)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias = inputs
        ctx.has_bias = bias is not None
        ctx.save_for_backward(x, weight)
        ctx.save_for_forward(x, weight)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        mask = mask_of(ctx, 3)
        mask[2] = mask[2] and ctx.has_bias
        return ops.causal_conv1d_backward(grad, x, weight, mask)

    @staticmethod
    def jvp(ctx, tx, tw, tb):
        x, weight = ctx.saved_tensors
        return conv_tangent(ops.causal_conv1d, x, weight, tx, tw, tb, x.shape, 1)

    @staticmethod
    def vmap(info, in_dims, x, weight, bias):
        n = info.batch_size
        x = _rank_checked(batch_first(x, in_dims[0], n), weight, bias)
        if in_dims[1] is None and in_dims[2] is None:
            return ops.causal_conv1d(x.flatten(0, 1), weight, bias).unflatten(0, (n, -1)), 0
        weight, bias = batch_first(weight, in_dims[1], n), batch_first(bias, in_dims[2], n)
        out = ops.causal_conv1d(_to_channels(x), weight.flatten(0, 1), None if bias is None else bias.flatten())
        return _from_channels(out, n), 0


class CausalConv1dBackward(torch.autograd.Function):
    # (g, x, weight) -> (gx, gw, gb), None where output_mask says so.

    @staticmethod
    def forward(g, x, weight, mask):
        with below_autograd():
            return ops.causal_conv1d_backward(g, x, weight, mask)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mask = inputs[3]
        ctx.save_for_backward(*inputs[:3])
        ctx.save_for_forward(*inputs[:3])
        ctx.set_materialize_grads(False)

    # Bilinear (registration/causal_conv1d.cpp): its gradient and tangent are the op and the backward op.
    @staticmethod
    def backward(ctx, ggx, ggw, ggb):
        g, x, weight = ctx.saved_tensors
        grads = conv_backward_grads(ops.causal_conv1d, ops.causal_conv1d_backward, mask_of(ctx, 3), g, x, weight,
                                    ggx, ggw, ggb, 1)
        return (*grads, None)

    @staticmethod
    def jvp(ctx, tg, tx, tw, _):
        g, x, weight = ctx.saved_tensors
        return conv_backward_tangents(ops.causal_conv1d_backward, ctx.mask, g, x, weight, tg, tx, tw)

    @staticmethod
    def vmap(info, in_dims, g, x, weight, mask):
        n = info.batch_size
        g, x = batch_first(g, in_dims[0], n), _rank_checked(batch_first(x, in_dims[1], n), weight)
        if in_dims[2] is None and not mask[1] and not mask[2]:
            # Only the input gradient, per sequence: the vmapped batch joins B.
            gx = ops.causal_conv1d_backward(g.flatten(0, 1), x.flatten(0, 1), weight, mask)[0]
            return (gx.unflatten(0, (n, -1)), None, None), (0, None, None)
        weight = batch_first(weight, in_dims[2], n)
        gx, gw, gb = ops.causal_conv1d_backward(_to_channels(g), _to_channels(x), weight.flatten(0, 1), mask)
        out = (None if gx is None else _from_channels(gx, n), None if gw is None else gw.unflatten(0, (n, -1)),
               None if gb is None else gb.unflatten(0, (n, -1)))
        return out, tuple(None if t is None else 0 for t in out)


# The training call with Mamba's arguments (causal_conv1d.mamba): seq_idx and initial_states follow x's batch;
# seq_idx masks taps, which are otherwise the plain op's, so the tangent of the pre-activation is still the op on the
# tangents (those of x and initial_states, then those of weight and bias); a SiLU multiplies it by its derivative.


def _mamba(x, weight, bias, activation, seq_idx, initial_states):
    return ops.causal_conv1d.mamba(x, weight, bias, activation=activation, seq_idx=seq_idx,
                                   initial_states=initial_states)


def _mamba_backward(g, x, weight, bias, mask, activation, seq_idx, initial_states):
    return ops.causal_conv1d_backward.mamba(g, x, weight, bias, mask, activation=activation, seq_idx=seq_idx,
                                            initial_states=initial_states)


def _joined_batch(t, bdim, n):
    """(n, B, ...) -> (n*B, ...): the vmapped dimension joined to the batch, an unbatched t repeated."""
    return None if t is None else batch_first(t, bdim, n).flatten(0, 1)


class CausalConv1dMamba(torch.autograd.Function):
    @staticmethod
    def forward(x, weight, bias, activation, seq_idx, initial_states):
        with below_autograd():
            return _mamba(x, weight, bias, activation, seq_idx, initial_states)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias, activation, seq_idx, initial_states = inputs
        ctx.activation, ctx.has_bias, ctx.has_init = activation, bias is not None, initial_states is not None
        ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)
        ctx.save_for_forward(x, weight, bias, seq_idx, initial_states)

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias, seq_idx, init = ctx.saved_tensors
        need = ctx.needs_input_grad
        mask = [need[0], need[1], need[2] and ctx.has_bias, need[5] and ctx.has_init]
        gx, gw, gb, gi = _mamba_backward(grad, x, weight, bias, mask, ctx.activation, seq_idx, init)
        return gx, gw, gb, None, None, gi

    @staticmethod
    def jvp(ctx, tx, tw, tb, _, __, ti):
        x, weight, bias, seq_idx, init = ctx.saved_tensors
        tangent = None
        if tx is not None or ti is not None:
            tx = torch.zeros_like(x) if tx is None else tx
            ti = torch.zeros_like(init) if ti is None and init is not None else ti
            tangent = _mamba(tx, weight, None, None, seq_idx, ti)
        if tw is not None or tb is not None:
            tw = torch.zeros_like(weight) if tw is None else tw
            term = _mamba(x, tw, tb, None, seq_idx, init)
            tangent = term if tangent is None else tangent + term
        if tangent is None:
            return None
        if ctx.activation is not None:
            pre = _mamba(x, weight, bias, None, seq_idx, init)
            s = torch.sigmoid(pre)
            tangent = tangent * (s * (1 + pre * (1 - s)))
        return tangent

    @staticmethod
    def vmap(info, in_dims, x, weight, bias, activation, seq_idx, initial_states):
        n = info.batch_size
        dx, dw, db, _, ds, di = in_dims
        x = _rank_checked(batch_first(x, dx, n), weight, bias)
        if dw is None and db is None:
            out = _mamba(x.flatten(0, 1), weight, bias, activation, _joined_batch(seq_idx, ds, n),
                         _joined_batch(initial_states, di, n))
            return out.unflatten(0, (n, -1)), 0
        if ds is None:
            # Per-sample filters: each sample's channels with their own filters, side by side in one call.
            weight, bias = batch_first(weight, dw, n), batch_first(bias, db, n)
            init = None if initial_states is None else _to_channels(batch_first(initial_states, di, n))
            out = _mamba(_to_channels(x), weight.flatten(0, 1), None if bias is None else bias.flatten(),
                         activation, seq_idx, init)
            return _from_channels(out, n), 0
        return slice_by_slice(_mamba, info, (0, dw, db, None, ds, di), x, weight, bias, activation, seq_idx,
                              initial_states)


class CausalConv1dMambaBackward(torch.autograd.Function):
    # (g, x, weight, bias, mask) -> (gx, gw, gb, g_initial_states), None where mask says so. Differentiable
    # once, as the C++ kernels (registration/causal_conv1d.cpp).

    @staticmethod
    def forward(g, x, weight, bias, mask, activation, seq_idx, initial_states):
        with below_autograd():
            return _mamba_backward(g, x, weight, bias, mask, activation, seq_idx, initial_states)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("customops::causal_conv1d: with activation, seq_idx or initial_states it is "
                           "differentiable once (its backward has no derivative); without them, twice")

    @staticmethod
    def vmap(info, in_dims, g, x, weight, bias, mask, activation, seq_idx, initial_states):
        n = info.batch_size
        dg, dx, dw, db, _, _, ds, di = in_dims
        g, x = batch_first(g, dg, n), _rank_checked(batch_first(x, dx, n), weight)
        if dw is None and db is None and not mask[1] and not mask[2]:
            # Only the gradients of x and initial_states, per sequence: the vmapped batch joins B.
            gx, _, _, gi = _mamba_backward(g.flatten(0, 1), x.flatten(0, 1), weight, bias, mask, activation,
                                           _joined_batch(seq_idx, ds, n), _joined_batch(initial_states, di, n))
            out = (None if gx is None else gx.unflatten(0, (n, -1)), None, None,
                   None if gi is None else gi.unflatten(0, (n, -1)))
            return out, tuple(None if t is None else 0 for t in out)
        if ds is None:
            weight, bias = batch_first(weight, dw, n), batch_first(bias, db, n)
            init = None if initial_states is None else _to_channels(batch_first(initial_states, di, n))
            gx, gw, gb, gi = _mamba_backward(_to_channels(g), _to_channels(x), weight.flatten(0, 1),
                                             None if bias is None else bias.flatten(), mask, activation, seq_idx,
                                             init)
            out = (None if gx is None else _from_channels(gx, n), None if gw is None else gw.unflatten(0, (n, -1)),
                   None if gb is None else gb.unflatten(0, (n, -1)), None if gi is None else _from_channels(gi, n))
            return out, tuple(None if t is None else 0 for t in out)
        return slice_by_slice(_mamba_backward, info, (0, 0, dw, db, None, None, ds, di), g, x, weight, bias, mask,
                              activation, seq_idx, initial_states)


# The decoding step (causal_conv1d.update) writes conv_state in place and has no gradient: under vmap it needs a
# batching rule, not an autograd.Function. Each sample writes its own state, so a batched argument needs a batched
# conv_state. With shared filters the vmapped dimension joins the batch (and the cache's rows, conv_state_indices
# shifted to each sample's block) when the state's two leading dimensions merge into one view; otherwise the rule
# calls the op sample by sample on views of the state, which the op writes through.


def _update(x, state, weight, bias, activation, cache_seqlens, indices):
    return ops.causal_conv1d.update(x, state, weight, bias, activation=activation, cache_seqlens=cache_seqlens,
                                    conv_state_indices=indices)


def _update_vmap(info, in_dims, x, state, weight, bias, activation, cache_seqlens, indices):
    n = info.batch_size
    dx, ds, dw, db, _, dl, di = in_dims
    if ds is None:
        raise RuntimeError("customops::causal_conv1d.update under vmap: conv_state is updated in place, so it must "
                           "be batched (each sample updates its own state) where "
                           + " and ".join(name for name, d in (("x", dx), ("weight", dw), ("bias", db),
                                                                ("cache_seqlens", dl), ("conv_state_indices", di))
                                          if d is not None) + " is")
    state = state.movedim(ds, 0)
    joined = _joined_state(state) if dw is None and db is None else None
    if joined is None:
        return slice_by_slice(_update, info, (dx, 0, dw, db, None, dl, di), x, state, weight, bias, activation,
                              cache_seqlens, indices)
    if indices is not None:
        each = batch_first(indices, di, n)
        offset = torch.arange(n, device=each.device, dtype=each.dtype)[:, None] * state.shape[1]
        indices = torch.where(each < 0, each, each + offset).flatten()  # negative: a padding row
    out = _update(batch_first(x, dx, n).flatten(0, 1), joined, weight, bias, activation,
                  _joined_batch(cache_seqlens, dl, n), indices)
    return out.unflatten(0, (n, -1)), 0


def _joined_state(state):
    """(n, B_cache, C, S) -> (n*B_cache, C, S) as a view, through which the op's writes land in the batched state;
    None where the two leading dimensions do not merge into one."""
    try:
        return state.view(-1, *state.shape[2:])
    except RuntimeError:
        return None


_BATCHED = torch.library.Library("customops", "IMPL", "FuncTorchBatched")


def _register_update_vmap() -> None:
    schema = ops.causal_conv1d.update._schema.arguments

    def kernel(_keyset, *args, **kwargs):
        return custom_function_call_vmap_helper(retrieve_current_functorch_interpreter(), _update_vmap, _update,
                                                *in_schema_order(schema, args, kwargs))

    _BATCHED.impl("causal_conv1d.update", kernel, "FuncTorchBatched", with_keyset=True)


_register_update_vmap()
register("causal_conv1d", CausalConv1d)
register("causal_conv1d_backward", CausalConv1dBackward)
register("causal_conv1d.mamba", CausalConv1dMamba)
register("causal_conv1d_backward.mamba", CausalConv1dMambaBackward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
DOC_ROWS = [
    (
        "`causal_conv1d`, `_backward`",
        "folded into B; per-sample filters (and weight gradients) as channels",
        "linear in each argument: the op on the tangents; backward op: bilinear, backward ops of the tangents",
    ),
    (
        "`causal_conv1d.mamba`, `_backward.mamba`",
        "folded into B with seq_idx and initial_states; per-sample filters as channels; per-sample seq_idx: "
        "sample by sample",
        "the op on the tangents (x's with initial_states', then the filters'), times SiLU's derivative; "
        "differentiable once",
    ),
    (
        "`causal_conv1d.update`",
        "folded into B (the cache's rows with `conv_state_indices`) with shared filters, else sample by sample; "
        "`conv_state` must be batched, as each sample updates its own",
        "none: the decoding step has no gradient",
    ),
]
