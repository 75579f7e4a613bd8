"""causal_conv1d: per channel, a filter of K taps over each step and the K-1 before it (Mamba's short
convolution)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from hypothesis import strategies as st
from torch.testing import make_tensor

import customops
from fuzz_common import T, batched
from strategies import Case, _dtype, _mask, tensor_spec

from ._common import ErrorInput, OpInfo, SampleInput, _other_device, _placements

ops = torch.ops.customops


def _causal_conv1d_ref(x, weight, bias=None, *, activation=None, seq_idx=None, initial_states=None,
                       return_final_states=False):
    """The definition, tap by tap: tap k of channel c multiplies x delayed by K-1-k steps, the steps before t = 0
    being initial_states (or zeros); with seq_idx, a tap counts only where the step it reads has t's index."""
    (B, C, L), K = x.shape, weight.shape[1]
    before = initial_states if initial_states is not None else x.new_zeros(B, C, K - 1)
    steps = torch.cat([before, x], dim=-1)  # steps[..., j] is x at t = j - (K-1)
    t = torch.arange(L, device=x.device)
    y = x.new_zeros(B, C, L)
    for k in range(K):
        term = weight[None, :, k, None] * steps[:, :, k:k + L]
        if seq_idx is not None:
            read = t - (K - 1) + k
            same = (read >= 0) & (seq_idx.long().gather(1, read.clamp(min=0).expand(B, L)) == seq_idx.long())
            term = term * same[:, None, :]
        y = y + term
    if bias is not None:
        y = y + bias[None, :, None]
    if activation is not None:
        y = y * torch.sigmoid(y)
    return (y, steps[..., L:]) if return_final_states else y


def _causal_conv1d_samples(device, dtype, requires_grad):
    def t(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=-2, high=2, requires_grad=requires_grad, **kw)

    yield SampleInput((t((2, 3, 9)), t((3, 4)), t((3,))), name="mamba_width")
    yield SampleInput((t((2, 3, 9)), t((3, 4)), None), name="no_bias")
    for K in (1, 2, 3, 8):
        yield SampleInput((t((2, 5, 11)), t((5, K)), t((5,))), name=f"K{K}")
    yield SampleInput((t((3, 2, 2)), t((2, 4)), t((2,))), name="shorter_than_filter")
    yield SampleInput((t((1, 4, 1)), t((4, 3)), t((4,))), name="one_step")
    yield SampleInput((t((0, 3, 6)), t((3, 4)), t((3,))), name="batch0")
    yield SampleInput((t((2, 3, 0)), t((3, 4)), t((3,))), name="length0")
    yield SampleInput((t((2, 0, 5)), t((0, 4)), t((0,))), name="channels0")
    # Past one CUDA tile (1024 steps) and not a multiple of it; enough steps that the weight gradient splits.
    yield SampleInput((t((2, 3, 1500)), t((3, 4)), t((3,))), name="long")
    yield SampleInput((t((3, 1, 2600)), t((1, 3)), t((1,))), name="one_channel_long")
    # Mamba's activations: (B, L, C) in memory, transposed to (B, C, L): the bare call takes the .mamba overload,
    # which reads them in place.
    yield SampleInput((t((2, 10, 6)).transpose(1, 2), t((6, 4)), t((6,))), name="transposed_BLC", overload="mamba",
                      skips=MAMBA_SKIPS)
    yield SampleInput((t((2, 3, 9), noncontiguous=True), t((3, 4), noncontiguous=True), t((3,), noncontiguous=True)),
                      name="noncontiguous")
    yield from mamba_samples(device, dtype, requires_grad)


# What the generic paths cannot do with the training call's keyword arguments, and why.
MAMBA_SKIPS = {
    "gradgrad": "differentiable once, as causal-conv1d's: with a fused SiLU the backward is not bilinear",
}


def mamba_samples(device, dtype, requires_grad):
    """The training call's keyword arguments (activation, seq_idx, initial_states), through
    customops::causal_conv1d.mamba; named mamba_*. seq_idx and initial_states are keyword arguments: the generic
    tests hold them fixed (tests/python/test_causal_conv1d_states.py checks the gradient of initial_states)."""

    def t(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=-2, high=2, requires_grad=requires_grad, **kw)

    def seq(*lengths):
        # One row of packed sequences of these lengths: indices 0, 1, ... (Mamba's varlen form).
        return torch.cat([torch.full((n,), i, dtype=torch.int32) for i, n in enumerate(lengths)]).to(device)

    def sample(args, kwargs, name):
        return SampleInput(args, kwargs, f"mamba_{name}", overload="mamba", skips=MAMBA_SKIPS)

    yield sample((t((2, 3, 9)), t((3, 4)), t((3,))), {"activation": "silu"}, "silu")
    yield sample((t((2, 3, 9)), t((3, 4)), None), {"activation": "swish"}, "swish_no_bias")
    yield sample((t((2, 3, 9)), t((3, 4)), t((3,))), {"initial_states": t((2, 3, 3))}, "initial_states")
    yield sample((t((2, 3, 2)), t((3, 4)), t((3,))), {"initial_states": t((2, 3, 3)), "activation": "silu"},
                 "initial_states_shorter_than_filter")
    yield sample((t((2, 3, 6)), t((3, 1)), t((3,))), {"initial_states": t((2, 3, 0))}, "initial_states_K1")
    rows = torch.stack([seq(3, 1, 5), seq(9)])
    yield sample((t((2, 3, 9)), t((3, 4)), t((3,))), {"seq_idx": rows}, "seq_idx")
    yield sample((t((2, 3, 9)), t((3, 4)), t((3,))), {"seq_idx": rows, "activation": "silu"}, "seq_idx_silu")
    # Mamba's layout: (B, L, C) activations viewed as (B, C, L), read in place; the result keeps the layout.
    yield sample((t((2, 10, 6)).transpose(1, 2), t((6, 4)), t((6,))),
                 {"activation": "silu", "initial_states": t((2, 3, 6)).transpose(1, 2)}, "channel_last")
    yield sample((t((2, 10, 6)).transpose(1, 2), t((6, 3)), None),
                 {"seq_idx": torch.stack([seq(4, 6), seq(2, 2, 6)]), "activation": "silu"}, "channel_last_seq_idx")
    # Channels in whole 16-byte vectors (16 of them): the CUDA kernels that walk runs of steps in this layout.
    yield sample((t((2, 20, 16)).transpose(1, 2), t((16, 4)), t((16,))),
                 {"activation": "silu", "initial_states": t((2, 3, 16)).transpose(1, 2)}, "channel_last_vectors")
    yield sample((t((1, 24, 16)).transpose(1, 2), t((16, 3)), None),
                 {"seq_idx": seq(1, 16, 7)[None], "activation": "silu"}, "channel_last_vectors_seq_idx")
    # Several of the CUDA kernels' tiles (64 steps x 64 channels, 32 in double's backward), the last ones partial;
    # sequences across them.
    yield sample((t((2, 150, 72)).transpose(1, 2), t((72, 4)), t((72,))),
                 {"activation": "silu", "initial_states": t((2, 3, 72)).transpose(1, 2)}, "channel_last_tiles")
    yield sample((t((1, 150, 72)).transpose(1, 2), t((72, 3)), None), {"seq_idx": seq(63, 2, 85)[None]},
                 "channel_last_tiles_seq_idx")
    # No keyword argument: a channel-last x still takes this overload (read in place).
    yield sample((t((2, 20, 16)).transpose(1, 2), t((16, 2)), t((16,))), {}, "channel_last_bare")
    yield sample((t((2, 3, 9), noncontiguous=True), t((3, 4), noncontiguous=True), t((3,))),
                 {"activation": "silu", "initial_states": t((2, 3, 3), noncontiguous=True)}, "noncontiguous")
    yield sample((t((0, 3, 6)), t((3, 4)), t((3,))), {"activation": "silu"}, "batch0")
    yield sample((t((2, 3, 0)), t((3, 4)), t((3,))), {"initial_states": t((2, 3, 3))}, "length0")
    yield sample((t((2, 0, 5)), t((0, 4)), None), {"activation": "silu"}, "channels0")
    yield sample((t((1, 2, 300)), t((2, 8)), t((2,))), {"seq_idx": seq(100, 57, 143)[None], "activation": "silu"},
                 "long_K8")


def _mamba_backward_args(sample, grad):
    x, w, b = sample.args
    init = sample.kwargs.get("initial_states")
    mask = [True, True, b is not None, init is not None]
    return (grad, x, w, b, mask), dict(sample.kwargs)


def _causal_conv1d_autocast_samples(device, low, requires_grad):
    """As under AMP: float32 weight and bias with a low-precision input, and with a float32 one."""

    def t(shape, dtype):
        return make_tensor(shape, device=device, dtype=dtype, low=-2, high=2, requires_grad=requires_grad)

    for x_dtype in (low, torch.float32):
        name = str(x_dtype).removeprefix("torch.")
        yield SampleInput((t((2, 4, 7), x_dtype), t((4, 4), torch.float32), t((4,), torch.float32)),
                          name=f"{name}_input")
        # Mamba's channel-last activations (whole vectors of channels: CUDA's tiled kernels), cast as autocast casts.
        yield SampleInput((t((2, 9, 16), x_dtype).transpose(1, 2), t((16, 4), torch.float32), t((16,), torch.float32)),
                          name=f"{name}_channel_last_input", overload="mamba", skips=MAMBA_SKIPS)


def _causal_conv1d_dynamic(device, dtype):
    # Batch, channels and steps differ from one another and between calls; the width stays (a Conv attribute).
    for b, c, n in ((2, 3, 5), (3, 5, 9), (5, 6, 13)):
        yield SampleInput((make_tensor((b, c, n), device=device, dtype=dtype, low=-2, high=2),
                           make_tensor((c, 4), device=device, dtype=dtype, low=-2, high=2),
                           make_tensor((c,), device=device, dtype=dtype, low=-2, high=2)), name=f"b{b}_c{c}_l{n}")


def _causal_conv1d_errors(device):
    x, w, b = torch.randn(2, 3, 8, device=device), torch.randn(3, 4, device=device), torch.randn(3, device=device)
    yield ErrorInput(SampleInput((x[0], w, b)), r"expected x of shape \(B, C, L\), got \[3, 8\]")
    yield ErrorInput(SampleInput((x, w[:2], b)), r"expected weight of shape \(C, K\) with C = x.size\(1\) = 3, "
                                                 r"got \[2, 4\]")
    yield ErrorInput(SampleInput((x, w[None], b)), r"expected weight of shape \(C, K\)")
    yield ErrorInput(SampleInput((x, torch.randn(3, 9, device=device), b)),
                     r"expected a filter width K = weight.size\(1\) between 1 and 8, got 9")
    yield ErrorInput(SampleInput((x, w[:, :0], b)), r"between 1 and 8, got 0")
    yield ErrorInput(SampleInput((x, w, b[:2])), r"expected bias of shape \(C,\) with C = x.size\(1\) = 3, got \[2\]")
    yield ErrorInput(SampleInput((x.long(), w, b)), r"expected x to be a floating-point tensor")
    yield ErrorInput(SampleInput((x, w.double(), b)), r"expected weight to have the dtype of x")
    yield ErrorInput(SampleInput((x, w, b.double())), r"expected bias to have the dtype of x")
    g = torch.randn(2, 3, 8, device=device)
    yield ErrorInput(SampleInput((g[:, :, :5], x, w, [True, True, True])), r"expected grad_out of x's shape",
                     backward=True)
    yield ErrorInput(SampleInput((g.double(), x, w, [True, True, True])), r"expected grad_out to have the dtype of x",
                     backward=True)
    other = _other_device(device)
    if other is not None:
        yield ErrorInput(SampleInput((x, w.to(other), b)), r"expected weight and x on the same device")
        yield ErrorInput(SampleInput((x, w, b.to(other))), r"expected bias and x on the same device")
        yield ErrorInput(SampleInput((g.to(other), x, w, [True, True, True])), r"expected grad_out and x on the same",
                         backward=True)


@st.composite
def _causal_conv1d_cases(draw, device):
    b, c = draw(st.integers(0, 4)), draw(st.one_of(st.integers(1, 6), st.sampled_from([16, 33])))
    n = draw(st.one_of(st.integers(0, 12), st.sampled_from([100, 1030])))
    k = draw(st.integers(1, 8))
    x, w = draw(tensor_spec((b, c, n), -2, 2)), draw(tensor_spec((c, k), -2, 2))
    bias = draw(st.none() | tensor_spec((c,), -2, 2))
    return Case("causal_conv1d", (x, w, bias), {}, draw(_dtype(device)), mask=_mask(draw, 3, bias is not None),
                grad_seed=draw(st.integers(0, 2**31 - 1)))


def _causal_conv1d_fuzz_call(rng, backward, device, dtype):
    batched(rng)  # drawn by every op's call, used or not: see fuzz_common.batched
    b, c, n, k = rng.randint(0, 3), rng.randint(0, 4), rng.randint(0, 9), rng.randint(0, 10)
    x, w = T([b, c, n], dtype, device), T([c, k], dtype, device)
    if backward:
        return [T([b, c, n], dtype, device), x, w, [rng.random() < 0.7 for _ in range(3)]]
    return [x, w, T([c], dtype, device) if rng.random() < 0.5 else None]


def _causal_conv1d_mamba_fuzz_call(rng, backward, device, dtype):
    b, c, n, k = rng.randint(0, 3), rng.randint(0, 4), rng.randint(0, 9), rng.randint(1, 5)
    x, w = T([b, c, n], dtype, device, "transposed" if rng.random() < 0.3 else "contiguous"), T([c, k], dtype, device)
    bias = T([c], dtype, device) if rng.random() < 0.5 else None
    activation = rng.choice([None, "silu", "swish"])
    seq_idx = T([b, n], torch.int32, device) if rng.random() < 0.4 else None
    init = T([b, c, k - 1], dtype, device) if seq_idx is None and rng.random() < 0.4 else None
    if backward:
        mask = [rng.random() < 0.7 for _ in range(4)]
        return [T([b, c, n], dtype, device), x, w, bias, mask, activation, seq_idx, init]
    return [x, w, bias, activation, seq_idx, init]


def _causal_conv1d_update_fuzz_call(rng, backward, device, dtype):
    b, c, k = rng.randint(0, 3), rng.randint(0, 4), rng.randint(1, 5)
    s = k - 1 + rng.randint(0, 2)
    x = T([b, c] if rng.random() < 0.5 else [b, c, rng.randint(1, 3)], dtype, device)
    seqlens = T([b], torch.int32, device) if rng.random() < 0.4 else None
    # Indices past the cache fail on the CPU, which checks them on the host; on a GPU, as PyTorch's indexing
    # kernels, with a device-side assert (no host sync in a decoding step), which ends the process's CUDA context:
    # the CUDA child passes none.
    indices = T([b], torch.int32, device) if device == "cpu" and rng.random() < 0.4 else None
    rows = rng.randint(0, 5) if indices is not None else b
    state = T([rows, c, max(s, 1) if seqlens is not None else s], dtype, device)
    return [x, state, T([c, k], dtype, device), T([c], dtype, device) if rng.random() < 0.5 else None,
            rng.choice([None, "silu"]), seqlens, indices]


def _causal_conv1d_sharding(rnd):
    Shard, R, P = _placements()
    x, w, b = rnd(4, 6, 10), rnd(6, 4), rnd(6)
    conv = ops.causal_conv1d.default
    yield "causal_conv1d batch", conv, (x, w, b), [Shard(0), R, R], [Shard(0)]
    yield "causal_conv1d channels", conv, (x, w, b), [Shard(1), Shard(0), Shard(0)], [Shard(1)]
    yield "causal_conv1d partial input", conv, (x, w, None), [P, R], [P]
    yield "causal_conv1d partial weight", conv, (x, w, None), [R, P], [P]
    backward = ops.causal_conv1d_backward.default
    bwd = (rnd(4, 6, 10), x, w, [True, True, True])
    yield "causal_conv1d_backward batch", backward, bwd, [Shard(0), Shard(0), R], [Shard(0), P, P]
    yield ("causal_conv1d_backward channels", backward, bwd, [Shard(1), Shard(1), Shard(0)],
           [Shard(1), Shard(0), Shard(0)])
    yield "causal_conv1d_backward partial", backward, bwd, [P, R, R], [P, P, P]
    # Mamba's arguments, keyword-only: each case's callable takes them positionally, after x, weight and bias.
    seq = torch.tensor([[0] * 4 + [1] * 6, [0] * 10, [0, 0, 1, 1, 1, 2, 2, 2, 2, 2], [0] * 3 + [1] * 7],
                       dtype=torch.int32)
    init = rnd(4, 6, 3)

    def mamba(activation=None, **names):
        return lambda x_, w_, b_, *rest: ops.causal_conv1d.mamba(x_, w_, b_, activation=activation,
                                                                 **dict(zip(names, rest)))

    yield "causal_conv1d.mamba batch", mamba("silu", seq_idx=1), (x, w, b, seq), [Shard(0), R, R, Shard(0)], [Shard(0)]
    yield ("causal_conv1d.mamba channels", mamba("silu", initial_states=1), (x, w, b, init),
           [Shard(1), Shard(0), Shard(0), Shard(1)], [Shard(1)])
    yield ("causal_conv1d.mamba channels seq_idx", mamba("silu", seq_idx=1), (x, w, b, seq),
           [Shard(1), Shard(0), Shard(0), R], [Shard(1)])
    yield "causal_conv1d.mamba partial", mamba(initial_states=1), (x, w, None, init), [P, R, P], [P]

    def mamba_backward(mask, activation=None, **names):
        return lambda g_, x_, w_, b_, *rest: ops.causal_conv1d_backward.mamba(
            g_, x_, w_, b_, mask, activation=activation, **dict(zip(names, rest)))

    g = rnd(4, 6, 10)
    yield ("causal_conv1d_backward.mamba batch", mamba_backward([True, True, True, False], "silu", seq_idx=1),
           (g, x, w, b, seq), [Shard(0), Shard(0), R, R, Shard(0)], [Shard(0), P, P])
    yield ("causal_conv1d_backward.mamba channels", mamba_backward([True] * 4, "silu", initial_states=1),
           (g, x, w, b, init), [Shard(1), Shard(1), Shard(0), Shard(0), Shard(1)],
           [Shard(1), Shard(0), Shard(0), Shard(1)])
    yield ("causal_conv1d_backward.mamba partial", mamba_backward([True, True, False, True], initial_states=1),
           (g, x, w, None, init), [P, R, R, R], [P, P, P])

    # The decoding step: each case returns the output and the state it updated in place, which must stay placed
    # as it came (the rule refuses to move it: distributed_checks.py) and equal the full call's.
    def update(**names):
        def call(x_, s_, w_, b_, *rest):
            return ops.causal_conv1d.update(x_, s_, w_, b_, activation="silu", **dict(zip(names, rest))), s_
        return call

    lens, rows = torch.tensor([0, 3, 7, 2], dtype=torch.int32), torch.tensor([4, -1, 0, 2], dtype=torch.int32)
    yield ("causal_conv1d.update channels", update(), (rnd(4, 6), rnd(4, 6, 5), w, b),
           [Shard(1), Shard(1), Shard(0), Shard(0)], [Shard(1), Shard(1)])
    yield ("causal_conv1d.update batch", update(cache_seqlens=1), (rnd(4, 6, 2), rnd(4, 6, 5), w, b, lens),
           [Shard(0), Shard(0), R, R, Shard(0)], [Shard(0), Shard(0)])
    yield ("causal_conv1d.update channels cache", update(conv_state_indices=1),
           (rnd(4, 6, 2), rnd(6, 6, 3), w, b, rows), [Shard(1), Shard(1), Shard(0), Shard(0), R], [Shard(1), Shard(1)])
    yield ("causal_conv1d.update replicated", update(), (rnd(4, 6), rnd(4, 6, 5), w, b), [R, R, R, R], [R, R])


def _causal_conv1d_onnx_nodes(sample):
    (b, c, n), width = sample.args[0].shape, sample.args[1].shape[1]
    if c == 0 or n == 0:
        return [("Identity", {})]  # an empty result: no Conv
    silu = [("Sigmoid", {})] if sample.kwargs.get("activation") else []
    if "seq_idx" in sample.kwargs:
        return [("Equal", {}), ("Slice", {})] + silu  # tap by tap, masked: no Conv can mask per step
    before = 0 if "initial_states" in sample.kwargs and width > 1 else width - 1
    conv = [("Conv", {"group": c, "kernel_shape": [1, width], "pads": [0, before, 0, 0]})]
    return conv + ([("Concat", {})] if before == 0 and width > 1 else []) + silu


class _WithSeqIdx(nn.Module):
    """A CausalConv1d's filter over packed sequences: forward(x, seq_idx)."""

    def __init__(self, conv: customops.CausalConv1d) -> None:
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor, seq_idx: torch.Tensor) -> torch.Tensor:
        return torch.ops.customops.causal_conv1d.mamba(x, self.conv.weight, self.conv.bias,
                                                       activation=self.conv.activation, seq_idx=seq_idx)


class _WithInitialStates(nn.Module):
    """A CausalConv1d's filter continuing a chunk: forward(x, initial_states)."""

    def __init__(self, conv: customops.CausalConv1d) -> None:
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor, initial_states: torch.Tensor) -> torch.Tensor:
        return torch.ops.customops.causal_conv1d.mamba(x, self.conv.weight, self.conv.bias,
                                                       activation=self.conv.activation,
                                                       initial_states=initial_states)


def _causal_conv1d_module(sample):
    x, w, b = sample.args
    m = customops.CausalConv1d(w.shape[0], w.shape[1], bias=b is not None, device=x.device, dtype=x.dtype,
                               activation=sample.kwargs.get("activation"))
    with torch.no_grad():
        m.weight.copy_(w)
        if b is not None:
            m.bias.copy_(b)
    if "seq_idx" in sample.kwargs:
        return _WithSeqIdx(m), (x.detach(), sample.kwargs["seq_idx"])
    if "initial_states" in sample.kwargs:
        return _WithInitialStates(m), (x.detach(), sample.kwargs["initial_states"].detach())
    return m, (x.detach(),)


CAUSAL_CONV1D = OpInfo(
    name="causal_conv1d",
    op=customops.causal_conv1d,
    ref=_causal_conv1d_ref,
    sample_inputs=_causal_conv1d_samples,
    dynamic_samples=_causal_conv1d_dynamic,
    error_inputs=_causal_conv1d_errors,
    module=_causal_conv1d_module,
    backward_args=lambda sample, grad: (grad, *sample.args[:2], [True, True, sample.args[2] is not None]),
    overload_backward_args=_mamba_backward_args,
    # The weight and bias gradients sum up to thousands of products (the long samples): float32's rounding of such
    # sums, in another order than the reference's, is about 1e-5 of their size.
    tolerances={torch.float64: (1e-10, 1e-12), torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2),
                torch.bfloat16: (5e-2, 5e-2)},
    autocast="lower_precision",
    autocast_samples=_causal_conv1d_autocast_samples,
    cases=_causal_conv1d_cases,
    property_cost=1.0,
    fuzz_call=_causal_conv1d_fuzz_call,
    fuzz_overloads={"mamba": _causal_conv1d_mamba_fuzz_call, "update": _causal_conv1d_update_fuzz_call},
    onnx_nodes=_causal_conv1d_onnx_nodes,
    sharding_cases=_causal_conv1d_sharding,
)

OPS = [CAUSAL_CONV1D]
