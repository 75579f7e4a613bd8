"""customops.causal_conv1d."""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from ._common import _overview

__all__ = ["causal_conv1d", "causal_conv1d_update"]


@_overview("Mamba's short convolution: `(B, C, L)` with a `(C, K)` filter per channel, each step from itself and "
           "the `K-1` before it (`K` up to 8), with Mamba's fused SiLU, packed sequences (`seq_idx`) and carried "
           "states, and its decoding step (`causal_conv1d_update`); one pass each way, deterministic weight "
           "gradient",
           layouts=("— (`(B, C, L)`; any strides, e.g. a transposed `(B, L, C)`)",
                    "—",
                    "contiguous; channel-last for a channel-last `x`"))
def causal_conv1d(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *, activation: Optional[str] = None,
                  seq_idx: Optional[Tensor] = None, initial_states: Optional[Tensor] = None,
                  return_final_states: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    r"""The depthwise causal 1-D convolution of sequence models (Mamba's, H3's,
    GLA's short convolutions), with the arguments of Mamba's ``causal_conv1d_fn``.

    ``y[b, c, t] = act(bias[c] + sum_k weight[c, k] * x[b, c, t - (K-1) + k])``,
    with ``x`` read as 0 before ``t = 0`` (or as ``initial_states``): each step
    sees itself and the ``K - 1`` steps before it, never a later one. Without
    the keyword arguments, the same as
    ``F.conv1d(x, weight.unsqueeze(1), bias, padding=K - 1, groups=C)[..., :L]``
    without the padded steps it computes and drops.

    Args:
        x: ``(B, C, L)``; float16, bfloat16, float32 or float64, on CPU or CUDA,
            of any strides (Mamba's ``(B, L, C)`` activations transposed to
            ``(B, C, L)``).
        weight: ``(C, K)`` with ``1 <= K <= 8``, or ``(C, 1, K)`` as
            ``nn.Conv1d(C, C, K, groups=C)`` holds it; ``x``'s dtype and device.
        bias: ``(C,)`` or None.
        activation: None, ``"silu"`` or ``"swish"`` (the same): applied to the
            sum in the same pass, and its derivative in the backward's.
        seq_idx: ``(B, L)`` int32 or None: sequences packed into one row; step
            ``t`` reads step ``t - j`` only where ``seq_idx[b, t - j] ==
            seq_idx[b, t]``, so no sequence sees another.
        initial_states: ``(B, C, K-1)`` or None: the ``K - 1`` steps before
            ``t = 0`` (the last ones of the previous chunk), in place of zeros;
            differentiable. Not with ``seq_idx`` (each packed sequence starts
            from zeros).
        return_final_states: also return the last ``K - 1`` steps of the input
            (``initial_states`` then ``x``, zeros before them where shorter):
            the ``initial_states`` of the next chunk, or the ``conv_state`` of a
            decoding step. Not with ``seq_idx``.

    Returns:
        ``(B, C, L)`` of ``x``'s dtype, computed in float32 for half types (and
        the ``(B, C, K-1)`` final states with ``return_final_states``). A
        channel-last ``x`` (Mamba's) is read in place and gives a channel-last
        result, with or without the keyword arguments; with ``activation``,
        ``seq_idx`` or ``initial_states`` any ``x`` gives a result in its own
        layout. Both are differentiable once (as causal-conv1d's), in
        ``initial_states`` too. The bare call (none of them) on any other
        ``x`` gives a contiguous result, differentiable twice in ``x``,
        ``weight`` and ``bias``. The weight and bias
        gradients are sums over batch and time in a fixed order (the same bits
        every run). Under ``torch.autocast`` it runs in the autocast dtype, as
        ``F.conv1d`` does.

    Example::

        >>> import torch, customops
        >>> x = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]])
        >>> customops.causal_conv1d(x, torch.tensor([[0.5, 1.0]]))
        tensor([[[1.0000, 2.5000, 4.0000, 5.5000]]])
        >>> y, state = customops.causal_conv1d(x, torch.tensor([[0.5, 1.0]]), activation="silu",
        ...                                    return_final_states=True)
        >>> state
        tensor([[[4.]]])
    """
    weight = _taps(weight)
    if seq_idx is not None and return_final_states:
        raise ValueError("customops.causal_conv1d: seq_idx and return_final_states cannot be given together "
                         "(a packed row ends with several sequences' steps, not one state)")
    if activation is None and seq_idx is None and initial_states is None and not _channel_last(x):
        out = torch.ops.customops.causal_conv1d(x, weight, bias)
    else:
        out = torch.ops.customops.causal_conv1d.mamba(x, weight, bias, activation=activation, seq_idx=seq_idx,
                                                      initial_states=initial_states)
    if not return_final_states:
        return out
    return out, _final_states(x, weight, initial_states)


def _channel_last(x: Tensor) -> bool:
    # Mamba's (B, L, C) activations viewed as (B, C, L): the .mamba overload's kernels read them in place and
    # write the result in the same layout, where the bare overload would copy x and give a contiguous result.
    return isinstance(x, Tensor) and x.dim() == 3 and x.stride(1) == 1 and x.stride(2) != 1


def _taps(weight: Tensor) -> Tensor:
    # (C, K), also from the (C, 1, K) of nn.Conv1d's depthwise weight.
    if isinstance(weight, Tensor) and weight.dim() == 3 and weight.size(1) == 1:
        return weight.squeeze(1)
    return weight


def _final_states(x: Tensor, weight: Tensor, initial_states: Optional[Tensor]) -> Tensor:
    # The last K-1 steps of initial_states (or zeros) followed by x: a copy of K-1 steps, differentiable as any
    # slice is.
    width = weight.shape[-1]
    before = initial_states if initial_states is not None else x.new_zeros(x.shape[0], x.shape[1], width - 1)
    return torch.cat([before, x], dim=-1)[..., x.shape[-1]:]


def causal_conv1d_update(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *,
                         activation: Optional[str] = None, cache_seqlens: Optional[Tensor] = None,
                         conv_state_indices: Optional[Tensor] = None) -> Tensor:
    r"""The decoding step of :func:`causal_conv1d`, with the arguments of Mamba's ``causal_conv1d_update``: the
    outputs of the new steps ``x`` after those held in ``conv_state``, which it updates **in place**.

    For each row ``b`` (with ``s = conv_state[b]``, or ``conv_state[conv_state_indices[b]]``) and ``x`` of ``L``
    steps, the output is that of :func:`causal_conv1d` at those steps of the whole sequence: ``y[b, c, t] =
    act(bias[c] + sum_k weight[c, k] * z[c, t + k])`` over ``z``, the last ``K - 1`` steps held in ``s`` then
    ``x[b]``. ``s`` then holds the last ``S`` steps of ``s`` followed by ``x[b]``. Prefill with
    ``causal_conv1d(..., return_final_states=True)``, whose final states are a ``conv_state`` of ``S = K - 1``
    steps, then decode token by token (or several tokens a call, as speculative decoding verifies drafts).

    Inference only: it has no gradient (a backward that reaches its result raises, as for an ATen op without a
    derivative; decode under ``torch.no_grad()`` or ``torch.inference_mode()``), and refuses a ``conv_state``
    that requires grad. In-place on ``conv_state`` as the schema declares
    (``Tensor(a!)``): ``torch.compile`` and ``torch.export`` functionalise it (an exported module's state buffer
    shows as a buffer mutation), and ExecuTorch's programs update the buffer in place.

    Args:
        x: ``(B, C)``, one new step per row, or ``(B, C, L)``, several; float16, bfloat16, float32 or float64, on
            CPU or CUDA, of any strides.
        conv_state: ``(B, C, S)`` with ``S >= K - 1`` (``(B_cache, C, S)`` with ``conv_state_indices``), of
            ``x``'s dtype and device; updated in place. Without ``cache_seqlens`` it holds the last ``S`` steps
            in order, oldest first.
        weight: ``(C, K)`` with ``1 <= K <= 8``, or ``(C, 1, K)`` as ``nn.Conv1d`` holds it.
        bias: ``(C,)`` or None.
        activation: None, ``"silu"`` or ``"swish"`` (the same).
        cache_seqlens: ``(B,)`` int32 or None: ``conv_state`` is a circular buffer, step ``n`` of row ``b`` at
            ``n mod S``; ``cache_seqlens[b]`` is the number of steps seen before ``x``: the ``K - 1`` steps before
            it are read from there, and ``x`` is written at ``cache_seqlens[b] mod S`` on (the caller advances
            ``cache_seqlens`` by ``L``).
        conv_state_indices: ``(B,)`` int32 or None: row ``b`` uses ``conv_state[conv_state_indices[b]]`` of a
            larger cache (continuous batching); a negative index marks a padding row, whose outputs are zeros
            and whose state is left alone. Rows must not share a state.

    Returns:
        ``x``'s shape and dtype, contiguous, computed in float32 for half types. Under ``torch.autocast`` the
        step runs in ``conv_state``'s dtype (the state cannot be cast: it is updated in place).

    Example::

        >>> import torch, customops
        >>> w = torch.tensor([[0.5, 1.0]])
        >>> y, state = customops.causal_conv1d(torch.tensor([[[1.0, 2.0, 3.0]]]), w, return_final_states=True)
        >>> customops.causal_conv1d_update(torch.tensor([[4.0]]), state, w)  # the 4th step of the whole sequence
        tensor([[5.5000]])
        >>> state
        tensor([[[4.]]])
    """
    weight = _taps(weight)
    return torch.ops.customops.causal_conv1d.update(x, conv_state, weight, bias, activation=activation,
                                                    cache_seqlens=cache_seqlens,
                                                    conv_state_indices=conv_state_indices)
