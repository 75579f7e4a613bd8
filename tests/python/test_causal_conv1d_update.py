"""causal_conv1d.update, the decoding step: against a float64 reference written from its definition, for every
combination of its arguments, dtype and device; prefill with the training call then decode, against the whole
sequence's forward; the refusals; vmap; the in-place update seen by autograd, autocast, torch.compile and
torch.export."""

from __future__ import annotations

import itertools
import re
import subprocess

import pytest
import torch
import torch.nn.functional as F
from torch.testing import make_tensor

import customops
from conftest import cuda_kernel_names, requires_cuda

pytestmark = pytest.mark.torch_dependent

ops = torch.ops.customops
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
TOLERANCES = {torch.float64: (1e-10, 1e-12), torch.float32: (1e-5, 1e-5), torch.float16: (1e-2, 1e-2),
              torch.bfloat16: (5e-2, 5e-2)}


def update_ref(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None, conv_state_indices=None):
    """The step from its definition, in float64 on the CPU: (output, the state after it). Row b's window is the
    K-1 steps before x (the state's last ones, or those before cache_seqlens[b] in a circular buffer) then x;
    its output the convolution over that window; its state the last S steps of the state then x (or x written
    at cache_seqlens[b] on, modulo S)."""
    squeeze = x.dim() == 2
    x = (x.unsqueeze(-1) if squeeze else x).detach().cpu().double()
    state = conv_state.detach().cpu().double().clone()
    w = weight.detach().cpu().double()
    B, C, L = x.shape
    K, S = w.shape[1], state.shape[2]
    out = torch.zeros(B, C, L, dtype=torch.float64)
    for b in range(B):
        row = int(conv_state_indices[b]) if conv_state_indices is not None else b
        if row < 0:
            continue
        s = state[row]
        if cache_seqlens is None:
            before = s[:, S - (K - 1):].clone()
            state[row] = torch.cat([s, x[b]], dim=-1)[:, -S:] if S else s
        else:
            n = int(cache_seqlens[b])
            before = s[:, [(n - (K - 1) + j) % S for j in range(K - 1)]]
            for t in range(L):
                s[:, (n + t) % S] = x[b, :, t]
        window = torch.cat([before, x[b]], dim=-1).unsqueeze(0)
        y = F.conv1d(window, w.unsqueeze(1), None if bias is None else bias.detach().cpu().double(), groups=C)
        out[b] = F.silu(y[0]) if activation in ("silu", "swish") else y[0]
    return (out.squeeze(-1) if squeeze else out), state


def _close(actual, expected, dtype, msg=None):
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(actual.cpu().double(), expected, rtol=rtol, atol=atol, msg=msg)


# (x is 2-D, L, S - (K-1), circular, indices, activation, bias)
CASES = list(itertools.product([True, False], [3], [0, 2], [False, True], [False, True], [None, "silu"],
                               [False, True]))


def _case_id(case):
    two_d, L, extra, circular, indices, activation, bias = case
    return "-".join([("x2d" if two_d else f"x3d{L}"), f"S+{extra}", "circ" if circular else "lin",
                     "idx" if indices else "noidx", activation or "noact", "bias" if bias else "nobias"])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_matches_reference(case, dtype, device):
    two_d, L, extra, circular, with_indices, activation, with_bias = case
    B, C, K = 3, 5, 4
    S = K - 1 + extra
    g = torch.Generator().manual_seed(CASES.index(case))

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)

    x = rand(B, C) if two_d else rand(B, C, L)
    weight, bias = rand(C, K), (rand(C) if with_bias else None)
    # A larger cache whose rows are picked out of order, one batch row a padding row.
    indices = torch.tensor([4, -1, 1], dtype=torch.int32, device=device) if with_indices else None
    state = rand(B + 2 if with_indices else B, C, S)
    seqlens = torch.tensor([5, 0, 13], dtype=torch.int32, device=device) if circular else None
    expected, expected_state = update_ref(x, state, weight, bias, activation, seqlens, indices)
    out = customops.causal_conv1d_update(x, state, weight, bias, activation=activation, cache_seqlens=seqlens,
                                         conv_state_indices=indices)
    assert out.shape == x.shape and out.dtype == dtype and out.is_contiguous()
    _close(out, expected, dtype)
    # The state is written from x's values, not computed: exact in every dtype.
    torch.testing.assert_close(state.cpu().double(), expected_state, rtol=0, atol=0)
    if with_indices:
        assert (out[1] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("S", [3, 4, 9])
@pytest.mark.parametrize("circular", [False, True], ids=["lin", "circ"])
def test_channels_over_several_blocks(circular, S, dtype, device):
    # 136 channels: two whole blocks of the CUDA kernel's 64 channels and a part of one, each block's rows taken
    # from a larger cache out of order, a padding row among them; states of 3, 4 and 9 steps.
    B, C, L, K = 3, 136, 2, 4
    g = torch.Generator().manual_seed(S + 10 * circular)

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)

    x, weight, bias = rand(B, C, L), rand(C, K), rand(C)
    state = rand(B + 2, C, S)
    indices = torch.tensor([3, -1, 0], dtype=torch.int32, device=device)
    seqlens = torch.tensor([7, 2, 0], dtype=torch.int32, device=device) if circular else None
    expected, expected_state = update_ref(x, state, weight, bias, "silu", seqlens, indices)
    out = customops.causal_conv1d_update(x, state, weight, bias, activation="silu", cache_seqlens=seqlens,
                                         conv_state_indices=indices)
    _close(out, expected, dtype)
    torch.testing.assert_close(state.cpu().double(), expected_state, rtol=0, atol=0)


# The CUDA word kernel: a thread per word of channels, every tensor moved in words: 16-byte words (8 channels of a
# half type, 4 of float), or 4-byte ones (2, 1) where a batch has fewer 16-byte words than 256 per multiprocessor
# (update.cu's kWordsPerSMToFill), as the small batches below on any GPU of a few multiprocessors or more. It takes
# K <= 4 with S = K-1 or K, C a multiple of its channels, the state's rows contiguous or its channel stride 1,
# aligned pointers, and no cache_seqlens; other calls take the kernel of a channel per thread. On the CPU the same
# cases run through the CPU kernel.
WORDS_PER_SM_TO_FILL = 256


def _rows_for_16_byte_words(C, dtype, device):
    """The smallest batch of C channels (a multiple of 16 bytes) that takes 16-byte words on device; on the CPU,
    where there are no words, a few rows."""
    if device != "cuda":
        return 4
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(4, -(-WORDS_PER_SM_TO_FILL * sms // (C * dtype.itemsize // 16)))


def _word_bytes(call):
    """The word size of the word kernel that call launches (CUDA): update_words_kernel's second template argument,
    its name demangled (update_words_kernel<float, 4, ...>) or not (update_words_kernelIfLi4E...)."""
    names = cuda_kernel_names(call)
    word = re.compile(r"update_words_kernel(?:<[^,]+, |I(?:N\w+?E|[a-z])Li)(\d+)")
    sizes = {int(m.group(1)) for m in map(word.search, names) if m}
    assert len(sizes) == 1, names
    return sizes.pop()


def _taller(t, rows):
    """A batch of `rows` rows laid out as t (contiguous, or its last two dimensions transposed): t's rows first,
    zeros after."""
    shape = t.shape[1:] if t.is_contiguous() else t.shape[1:][::-1]
    big = t.new_zeros(rows, *shape)
    big = big if t.is_contiguous() else big.transpose(1, 2)
    big[:t.shape[0]] = t
    return big


def _rand(g, *shape, dtype, device):
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)


def _state(layout, rows, C, S, g, dtype, device):
    """A (rows, C, S) state: "rows" contiguous (Dao's and Mamba 1's), "slots" a transposed (rows, S, C) tensor, its
    channel stride 1 (Mamba 2's)."""
    if layout == "rows":
        return _rand(g, rows, C, S, dtype=dtype, device=device)
    return _rand(g, rows, S, C, dtype=dtype, device=device).transpose(1, 2)


def _token(kind, B, C, g, dtype, device):
    """x: "x2d" (B, C); "x3d" (B, C, 3) contiguous, each step's channels apart; "xcl" a transposed (B, 3, C)
    tensor, each step's channels together."""
    if kind == "x2d":
        return _rand(g, B, C, dtype=dtype, device=device)
    if kind == "x3d":
        return _rand(g, B, C, 3, dtype=dtype, device=device)
    return _rand(g, B, 3, C, dtype=dtype, device=device).transpose(1, 2)


WORD_DTYPES = [torch.bfloat16, torch.float16, torch.float32]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["rows", "slots"])
@pytest.mark.parametrize("K", [2, 3, 4])
@pytest.mark.parametrize("dtype", WORD_DTYPES, ids=str)
def test_word_kernel_states_and_tokens(dtype, K, layout, device):
    # 136 channels: 68 threads of 2 (136 of 1) in 4-byte words, a part of a block; the rows of a larger cache out of
    # order, a padding row among them; states of K-1 and K steps; x of one step or three; with bias and SiLU and
    # without. Then the same rows first in a batch of padding rows large enough for 16-byte words: the same bits.
    B, C = 3, 136
    large = _rows_for_16_byte_words(C, dtype, device)
    g = torch.Generator().manual_seed(K + 10 * (layout == "slots") + 100 * WORD_DTYPES.index(dtype))
    indices = torch.tensor([3, -1, 0], dtype=torch.int32, device=device)
    for S, kind, (with_bias, activation) in itertools.product([K - 1, K], ["x2d", "x3d", "xcl"],
                                                              [(True, "silu"), (False, None)]):
        x = _token(kind, B, C, g, dtype, device)
        weight = _rand(g, C, K, dtype=dtype, device=device)
        bias = _rand(g, C, dtype=dtype, device=device) if with_bias else None
        state = _state(layout, B + 2, C, S, g, dtype, device)
        before = state.clone()
        expected, expected_state = update_ref(x, state, weight, bias, activation, None, indices)
        out = customops.causal_conv1d_update(x, state, weight, bias, activation=activation,
                                             conv_state_indices=indices)
        case = f"S={S}, {kind}, bias={with_bias}, {activation}"
        _close(out, expected, dtype, msg=lambda m: f"{case}: {m}")
        torch.testing.assert_close(state.cpu().double(), expected_state, rtol=0, atol=0,
                                   msg=lambda m: f"{case}: {m}")
        assert (out[1] == 0).all(), case
        rows = torch.full((large,), -1, dtype=torch.int32, device=device)
        rows[:B] = indices
        big = customops.causal_conv1d_update(_taller(x, large), before, weight, bias, activation=activation,
                                             conv_state_indices=rows)
        assert torch.equal(big[:B], out) and torch.equal(before, state), case


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["rows", "slots"])
@pytest.mark.parametrize("C", [64, 1032])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_word_kernel_over_blocks(dtype, C, layout, device):
    # One step of Mamba's decoding, no indices: 64 channels, 32 threads of 2 (64 of 1) in 4-byte words; 1032, 516
    # threads of 2 (1032 of 1), over five blocks (nine) of the word kernel's 128 threads.
    B, K = 4, 4
    g = torch.Generator().manual_seed(C + (layout == "slots"))
    x, weight, bias = (_rand(g, *shape, dtype=dtype, device=device) for shape in ((B, C), (C, K), (C,)))
    state = _state(layout, B, C, K - 1, g, dtype, device)
    expected, expected_state = update_ref(x, state, weight, bias, "silu")
    out = customops.causal_conv1d_update(x, state, weight, bias, activation="silu")
    _close(out, expected, dtype)
    torch.testing.assert_close(state.cpu().double(), expected_state, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["rows", "slots"])
@pytest.mark.parametrize("C", [136, 5120])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_word_kernel_small_and_large_batches(dtype, C, layout, device):
    # Two rows take 4-byte words (C=5120 in bf16: 1280 16-byte words, 5120 threads of 4-byte ones); the same two
    # rows last in a batch large enough for 16-byte words (on an H100, 1988 rows of 136 bf16 channels, 53 of 5120):
    # both against the reference (the large batch on 16 rows spread over it), and the same bits.
    K = 4
    large = _rows_for_16_byte_words(C, dtype, device)
    g = torch.Generator().manual_seed(C + (layout == "slots") + 10 * (dtype == torch.float32))
    weight, bias = _rand(g, C, K, dtype=dtype, device=device), _rand(g, C, dtype=dtype, device=device)
    for S, kind in [(K - 1, "x2d"), (K, "xcl")]:
        x, state = _token(kind, 2, C, g, dtype, device), _state(layout, 2, C, S, g, dtype, device)
        big_x, big_state = _token(kind, large, C, g, dtype, device), _state(layout, large, C, S, g, dtype, device)
        big_x[-2:], big_state[-2:] = x, state
        outs = []
        for x_, state_, word in ((x, state, 4), (big_x, big_state, 16)):
            if device == "cuda":
                assert _word_bytes(lambda: customops.causal_conv1d_update(x_, state_.clone(), weight, bias,
                                                                          activation="silu")) == word
            rows = torch.linspace(0, len(x_) - 1, min(len(x_), 16), device=device).round().long()
            expected, expected_state = update_ref(x_[rows], state_[rows], weight, bias, "silu")
            outs.append(customops.causal_conv1d_update(x_, state_, weight, bias, activation="silu"))
            case = f"S={S}, {kind}, {len(x_)} rows"
            _close(outs[-1][rows], expected, dtype, msg=lambda m: f"{case}: {m}")
            torch.testing.assert_close(state_[rows].cpu().double(), expected_state, rtol=0, atol=0,
                                       msg=lambda m: f"{case}: {m}")
        assert torch.equal(outs[1][-2:], outs[0]) and torch.equal(big_state[-2:], state), f"S={S}, {kind}"


def _misaligned(t):
    """t's values in a contiguous tensor one element past its allocation's start, so not 16-byte aligned."""
    return torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)[1:].view(t.shape).copy_(t)


# At this batch the word kernel takes 4-byte words. Each case misses one of its conditions for bf16: "channels", C
# not a multiple of 2; "strided", the state a slice of a wider one (rows of stride S+1); "state", "weight", "bias",
# one element off 4-byte alignment: the other kernel. "x" misaligned: the word kernel, reading x channel by
# channel. For float (1 channel a word, 4-byte aligned) only "strided" leaves the word kernel.
BESIDE_WORDS = ["channels", "strided", "state", "weight", "bias", "x"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("case", BESIDE_WORDS)
def test_calls_beside_the_word_kernel(case, dtype, device):
    B, K, S = 3, 4, 3
    C = 9 if case == "channels" else 16
    g = torch.Generator().manual_seed(BESIDE_WORDS.index(case))
    x, weight, bias = (_rand(g, *shape, dtype=dtype, device=device) for shape in ((B, C), (C, K), (C,)))
    state = _rand(g, B, C, S, dtype=dtype, device=device)
    given = dict(x=x, state=state.clone(), weight=weight, bias=bias)
    if case == "strided":
        given["state"] = _rand(g, B, C, S + 1, dtype=dtype, device=device)[..., 1:].copy_(state)
    elif case != "channels":
        given[case] = _misaligned(given[case])
    expected, expected_state = update_ref(x, state, weight, bias, "silu")
    out = customops.causal_conv1d_update(given["x"], given["state"], given["weight"], given["bias"],
                                         activation="silu")
    _close(out, expected, dtype)
    torch.testing.assert_close(given["state"].cpu().double(), expected_state, rtol=0, atol=0)
    # The two kernels sum in the same order: the bits of the call on aligned, contiguous copies.
    aligned = customops.causal_conv1d_update(x, state, weight, bias, activation="silu")
    assert torch.equal(out, aligned) and torch.equal(given["state"], state)


@pytest.mark.parametrize("device", DEVICES)
def test_strided_inputs_and_state(device):
    # x a transposed (B, L, C) tensor, the state a slice of a wider buffer: read and written through their strides.
    B, C, L, K, S = 2, 6, 3, 3, 4
    x = torch.randn(B, L, C, dtype=torch.float64, device=device).transpose(1, 2)
    buffer = torch.randn(B, C, S + 3, dtype=torch.float64, device=device)
    state = buffer[..., 1:S + 1]
    untouched = buffer[..., [0, S + 1, S + 2]].clone()
    weight = torch.randn(C, K, dtype=torch.float64, device=device)
    expected, expected_state = update_ref(x, state, weight, activation="silu")
    out = customops.causal_conv1d_update(x, state, weight, activation="silu")
    _close(out, expected, torch.float64)
    torch.testing.assert_close(state.cpu(), expected_state, rtol=0, atol=0)
    torch.testing.assert_close(buffer[..., [0, S + 1, S + 2]], untouched, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("K", [1, 2, 4, 8])
def test_every_width_and_long_steps(K, device):
    # L > S (the state keeps the last S of x) in both state kinds, and the widths of the CUDA kernel's cases.
    B, C, L, S = 2, 3, 7, max(K - 1, 2)
    x = torch.randn(B, C, L, dtype=torch.float64, device=device)
    weight = torch.randn(C, K, dtype=torch.float64, device=device)
    bias = torch.randn(C, dtype=torch.float64, device=device)
    for seqlens in (None, torch.tensor([3, 11], dtype=torch.int32, device=device)):
        state = torch.randn(B, C, S, dtype=torch.float64, device=device)
        expected, expected_state = update_ref(x, state, weight, bias, None, seqlens)
        out = customops.causal_conv1d_update(x, state, weight, bias, cache_seqlens=seqlens)
        _close(out, expected, torch.float64)
        torch.testing.assert_close(state.cpu(), expected_state, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batch(device):
    state = torch.zeros(0, 4, 3, device=device)
    out = customops.causal_conv1d_update(torch.zeros(0, 4, device=device), state, torch.ones(4, 4, device=device))
    assert out.shape == (0, 4)


# Prefill with the training call, then decode: every decoded step is the whole sequence's forward at that step.

def _sequence(device, dtype=torch.float32, B=2, C=6, L=13, K=4):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, C, L, generator=g).to(device=device, dtype=dtype)
    weight = torch.randn(C, K, generator=g).to(device=device, dtype=dtype)
    bias = torch.randn(C, generator=g).to(device=device, dtype=dtype)
    return x, weight, bias


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tokens_per_call", [1, 3])
def test_prefill_then_decode_equals_forward(tokens_per_call, device):
    x, weight, bias = _sequence(device)
    prompt = 5
    full = customops.causal_conv1d(x, weight, bias, activation="silu")
    y, state = customops.causal_conv1d(x[..., :prompt], weight, bias, activation="silu", return_final_states=True)
    torch.testing.assert_close(y, full[..., :prompt], rtol=1e-6, atol=1e-6)
    state = state.contiguous()
    for t in range(prompt, x.shape[-1], tokens_per_call):
        step = x[..., t:t + tokens_per_call]
        step = step[..., 0] if tokens_per_call == 1 else step
        out = customops.causal_conv1d_update(step, state, weight, bias, activation="silu")
        expected = full[..., t:t + tokens_per_call]
        torch.testing.assert_close(out, expected[..., 0] if tokens_per_call == 1 else expected, rtol=1e-6,
                                   atol=1e-6)
    # The state ends as the training call's final states of the whole sequence.
    _, final = customops.causal_conv1d(x, weight, bias, return_final_states=True)
    torch.testing.assert_close(state, final, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_circular_decode_from_zeros_equals_forward(device):
    # A circular buffer of 6 steps, cache_seqlens advancing by each call's steps, rows at different positions of
    # a larger cache: the same outputs as the forward of each row's sequence.
    x, weight, bias = _sequence(device)
    B, C, L = x.shape
    full = customops.causal_conv1d(x, weight, bias)
    cache = torch.zeros(B + 3, C, 6, device=device)
    indices = torch.tensor([3, 1], dtype=torch.int32, device=device)
    seqlens = torch.zeros(B, dtype=torch.int32, device=device)
    for t in range(0, L, 2):
        step = x[..., t:t + 2]
        out = customops.causal_conv1d_update(step, cache, weight, bias, cache_seqlens=seqlens,
                                             conv_state_indices=indices)
        torch.testing.assert_close(out, full[..., t:t + 2], rtol=1e-6, atol=1e-6)
        seqlens += step.shape[-1]
    assert (cache[[0, 2, 4]] == 0).all()


# Refusals, each naming its argument.

def _args(**changes):
    args = dict(x=torch.randn(2, 3), conv_state=torch.randn(2, 3, 3), weight=torch.randn(3, 4), bias=None,
                activation=None, cache_seqlens=None, conv_state_indices=None)
    args.update(changes)
    return args


REFUSALS = [
    ("x_dims", _args(x=torch.randn(2, 3, 1, 1)), r"expected x of shape \(B, C\) or \(B, C, L\)"),
    ("x_dtype", _args(x=torch.ones(2, 3, dtype=torch.int64)), r"x"),
    ("weight_channels", _args(weight=torch.randn(4, 4)), r"expected weight of shape \(C, K\)"),
    ("weight_width", _args(weight=torch.randn(3, 9), conv_state=torch.randn(2, 3, 8)), r"filter width"),
    ("weight_dtype", _args(weight=torch.randn(3, 4, dtype=torch.float64)), r"weight"),
    ("bias_shape", _args(bias=torch.randn(4)), r"expected bias of shape \(C,\)"),
    ("state_short", _args(conv_state=torch.randn(2, 3, 2)), r"expected conv_state of shape .*S >= K-1 = 3"),
    ("state_channels", _args(conv_state=torch.randn(2, 4, 3)), r"expected conv_state of shape"),
    ("state_batch", _args(conv_state=torch.randn(3, 3, 3)), r"expected conv_state of batch size B"),
    ("state_dtype", _args(conv_state=torch.randn(2, 3, 3, dtype=torch.float64)), r"conv_state"),
    ("activation", _args(activation="relu"), r"expected activation None, \"silu\" or \"swish\""),
    ("seqlens_dtype", _args(cache_seqlens=torch.zeros(2, dtype=torch.int64)),
     r"expected cache_seqlens of dtype int32"),
    ("seqlens_shape", _args(cache_seqlens=torch.zeros(3, dtype=torch.int32)),
     r"expected cache_seqlens of shape \(B,\)"),
    ("seqlens_empty_state", _args(weight=torch.randn(3, 1), conv_state=torch.randn(2, 3, 0),
                                  cache_seqlens=torch.zeros(2, dtype=torch.int32)), r"S >= 1"),
    ("indices_dtype", _args(conv_state_indices=torch.zeros(2, dtype=torch.int64)),
     r"expected conv_state_indices of dtype int32"),
    ("indices_shape", _args(conv_state_indices=torch.zeros(1, dtype=torch.int32)),
     r"expected conv_state_indices of shape \(B,\)"),
    ("indices_range", _args(conv_state_indices=torch.tensor([0, 2], dtype=torch.int32)),
     r"conv_state_indices\[1\] = 2 is out of range for a conv_state of 2 rows"),
]


@pytest.mark.parametrize("args,message", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusals(args, message):
    args = dict(args)
    with pytest.raises(RuntimeError, match=message):
        ops.causal_conv1d.update(args.pop("x"), args.pop("conv_state"), args.pop("weight"), args.pop("bias"),
                                 **args)


@pytest.mark.parametrize("device", DEVICES)
def test_out_variant_is_the_update_written_into_out(device):
    """causal_conv1d.update_out, what ExecuTorch's programs call: the update's output and state, out resized from
    empty or written in place, its dtype checked, the op's refusals kept."""
    x, weight, bias = _sequence(device, L=3)
    state = make_tensor((2, 6, 4), device=device, dtype=torch.float32, low=-2, high=2)
    want_state = state.clone()
    want = ops.causal_conv1d.update(x, want_state, weight, bias, activation="silu")
    for out in (torch.empty(0, device=device), torch.full_like(want, float("nan"))):
        got_state = state.clone()
        returned = ops.causal_conv1d.update_out(x, got_state, weight, bias, activation="silu", out=out)
        assert returned is out
        torch.testing.assert_close(out, want, rtol=0, atol=0)
        torch.testing.assert_close(got_state, want_state, rtol=0, atol=0)
    same = torch.empty_like(want)
    pointer = same.data_ptr()
    ops.causal_conv1d.update_out(x, state.clone(), weight, bias, activation="silu", out=same)
    assert same.data_ptr() == pointer
    with pytest.raises(RuntimeError, match=r"causal_conv1d.update_out: expected out of dtype Float, got Double"):
        ops.causal_conv1d.update_out(x, state.clone(), weight, bias, out=torch.empty(0, device=device,
                                                                                     dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"S >= K-1"):
        ops.causal_conv1d.update_out(x, state[..., :2].clone(), weight, bias, out=torch.empty(0, device=device))


@pytest.mark.parametrize("device", ["meta"])
def test_meta_refuses_as_the_kernels(device):
    with pytest.raises(RuntimeError, match=r"S >= K-1"):
        ops.causal_conv1d.update(torch.randn(2, 3, device=device), torch.randn(2, 3, 2, device=device),
                                 torch.randn(3, 4, device=device))
    out = ops.causal_conv1d.update(torch.randn(2, 3, 5, device=device), torch.randn(2, 3, 3, device=device),
                                   torch.randn(3, 4, device=device))
    assert out.shape == (2, 3, 5) and out.is_contiguous()


@requires_cuda
def test_devices_must_match():
    with pytest.raises(RuntimeError, match=r"conv_state"):
        ops.causal_conv1d.update(torch.randn(2, 3, device="cuda"), torch.randn(2, 3, 3), torch.randn(3, 4,
                                                                                                      device="cuda"))


def test_inference_only():
    # A result autograd would record carries a node that raises when a backward reaches it, as an ATen op without
    # a derivative; the step itself runs (tracers pass through it with parameters that require grad).
    weight = torch.randn(3, 4, requires_grad=True)
    state = torch.zeros(2, 3, 3)
    x = torch.randn(2, 3)
    out = customops.causal_conv1d_update(x, state, weight)
    assert out.requires_grad
    torch.testing.assert_close(state[..., -1], x, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match=r"the decoding step is inference only and has no gradient"):
        out.sum().backward()
    with torch.no_grad():
        assert not customops.causal_conv1d_update(x, state, weight).requires_grad
    with torch.inference_mode():
        customops.causal_conv1d_update(x, torch.zeros(2, 3, 3), weight)
    with pytest.raises(RuntimeError, match=r"conv_state requires grad, but the decoding step updates it in place"):
        customops.causal_conv1d_update(x, torch.zeros(2, 3, 3, requires_grad=True), weight)


def test_bumps_the_state_version():
    state = torch.zeros(2, 3, 3)
    before = state._version
    customops.causal_conv1d_update(torch.randn(2, 3), state, torch.randn(3, 4))
    assert state._version > before


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_runs_in_the_state_dtype(device):
    x, weight, bias = torch.randn(2, 3, device=device), torch.randn(3, 4, device=device), torch.randn(3, device=device)
    state = torch.randn(2, 3, 3, device=device, dtype=torch.bfloat16)
    expected_state = state.clone()
    expected = customops.causal_conv1d_update(x.bfloat16(), expected_state, weight.bfloat16(), bias.bfloat16())
    with torch.autocast(device, dtype=torch.bfloat16):
        out = customops.causal_conv1d_update(x, state, weight, bias)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(state, expected_state, rtol=0, atol=0)


def test_opcheck():
    # Schema (the declared mutation), fake tensors and the functionalised trace of the in-place step.
    args = (torch.randn(2, 3, 2), torch.randn(4, 3, 5), torch.randn(3, 4), torch.randn(3))
    kwargs = dict(activation="silu", cache_seqlens=torch.tensor([1, 7], dtype=torch.int32),
                  conv_state_indices=torch.tensor([3, -1], dtype=torch.int32))
    torch.library.opcheck(ops.causal_conv1d.update, args, kwargs,
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


# vmap: each sample of the vmapped dimension is a decoding step of its own, on its own state.

def _vmap_case(device, n=3, B=2, C=4, K=4, S=5, L=None, rows=None):
    def t(*shape):
        return make_tensor(shape, device=device, dtype=torch.float64, low=-2, high=2)

    x = t(n, B, C) if L is None else t(n, B, C, L)
    return x, t(n, rows or B, C, S), t(C, K), t(C)


def _per_sample(x, state, weight, bias, **kwargs):
    """The reference of each sample, stacked: (outputs, states)."""
    results = [update_ref(x[i], state[i], weight[i] if weight.dim() == 3 else weight, bias, activation="silu",
                          **{k: v[i] if v.dim() == 2 else v for k, v in kwargs.items()}) for i in range(x.shape[0])]
    return torch.stack([r[0] for r in results]), torch.stack([r[1] for r in results])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L", [None, 3])
def test_vmap_updates_each_samples_state(device, L):
    x, state, weight, bias = _vmap_case(device, L=L)
    want, want_state = _per_sample(x, state, weight, bias)
    out = torch.func.vmap(lambda x_, s_: ops.causal_conv1d.update(x_, s_, weight, bias, activation="silu"))(x, state)
    _close(out, want, torch.float64)
    _close(state, want_state, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_with_per_sample_filters_and_a_state_batched_inside(device):
    # The state's vmapped dimension second: its two leading dimensions do not merge, so the rule goes sample by
    # sample; per-sample filters too.
    x, state, _, bias = _vmap_case(device)
    weights = make_tensor((3, 4, 4), device=device, dtype=torch.float64, low=-2, high=2)
    want, want_state = _per_sample(x, state, weights, bias)
    inner = state.transpose(0, 1).contiguous()  # (B, n, C, S)
    out = torch.func.vmap(lambda x_, s_, w_: ops.causal_conv1d.update(x_, s_, w_, bias, activation="silu"),
                          in_dims=(0, 1, 0))(x, inner, weights)
    _close(out, want, torch.float64)
    _close(inner.transpose(0, 1), want_state, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batched_indices", [False, True])
def test_vmap_with_a_cache_and_circular_states(device, batched_indices):
    x, state, weight, bias = _vmap_case(device, L=2, rows=5)
    rows = torch.tensor([[3, -1], [0, 4], [-1, 2]], dtype=torch.int32, device=device)
    rows = rows if batched_indices else rows[1]
    lens = torch.tensor([[0, 9], [4, 1], [7, 7]], dtype=torch.int32, device=device)
    want, want_state = _per_sample(x, state, weight, bias, conv_state_indices=rows, cache_seqlens=lens)

    def step(x_, s_, i_, l_):
        return ops.causal_conv1d.update(x_, s_, weight, bias, activation="silu", cache_seqlens=l_,
                                        conv_state_indices=i_)

    out = torch.func.vmap(step, in_dims=(0, 0, 0 if batched_indices else None, 0))(x, state, rows, lens)
    _close(out, want, torch.float64)
    _close(state, want_state, torch.float64)


def test_vmap_refuses_a_shared_state():
    x, state, weight, bias = _vmap_case("cpu")
    with pytest.raises(RuntimeError, match=r"conv_state is updated in place, so it must be batched .* where x is"):
        torch.func.vmap(lambda x_: ops.causal_conv1d.update(x_, state[0], weight, bias))(x)


@pytest.mark.parametrize("device", DEVICES)
def test_threads_and_streams_decoding_at_once_give_the_serial_results(device):
    """Four threads each decode a sequence of their own at once (on CUDA each on a stream of its own, as a server's
    request threads): the outputs and states of decoding them one after another, bit for bit."""
    from concurrent.futures import ThreadPoolExecutor

    def sequence(i):
        g = torch.Generator().manual_seed(i)
        return [torch.randn(s, generator=g).to(device) for s in ((3, 16, 12), (3, 16, 4), (16, 4), (16,))]

    def decode(x, state, weight, bias, lens):
        outs = [ops.causal_conv1d.update(x[..., t], state, weight, bias, activation="silu",
                                         cache_seqlens=lens + t) for t in range(x.shape[-1])]
        return torch.stack(outs), state

    def threaded(i):
        x, state, weight, bias = sequence(i)
        lens = torch.tensor([0, 5, 9], dtype=torch.int32, device=device)
        if device == "cuda":
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                out = decode(x, state, weight, bias, lens)
            stream.synchronize()
            return out
        return decode(x, state, weight, bias, lens)

    serial = [threaded(i) for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        concurrent = list(pool.map(threaded, range(4)))
    for (out, state), (want, want_state) in zip(concurrent, serial):
        assert torch.equal(out, want) and torch.equal(state, want_state)


# TorchScript: a decoding model scripted in Python, its state a buffer, run from Python and from the C++ app.

class _Decoder(torch.nn.Module):
    def __init__(self, weight, bias, state):
        super().__init__()
        self.register_buffer("weight", weight)
        self.register_buffer("bias", bias)
        self.register_buffer("state", state)

    def forward(self, token: torch.Tensor) -> torch.Tensor:
        # As docs/guide/ops.md tells: TorchScript takes the op, whose arguments pick the update overload.
        return torch.ops.customops.causal_conv1d(token, self.state, self.weight, self.bias, activation="silu")


def _prefilled(device):
    """A prompt of two steps prefilled, three steps left to decode: (x, weight, bias, state)."""
    x, weight, bias = _sequence(device, L=5)
    _, state = customops.causal_conv1d(x[..., :2], weight, bias, activation="silu", return_final_states=True)
    return x, weight, bias, state.contiguous()


def _decodes_as_eager(loaded, x, weight, bias, state):
    """A loaded decoder's steps against eager's, bit for bit: (the eager decoder after them, what a C++ app's
    warm-up call then two calls of the first step's token must output, each call updating the state)."""
    eager = _Decoder(weight, bias, state.clone())
    with torch.no_grad():
        for t in range(2, 5):
            torch.testing.assert_close(loaded(x[..., t]), eager(x[..., t]), rtol=0, atol=0)
        again = _Decoder(weight, bias, state.clone())
        return eager, [again(x[..., 2]) for _ in range(3)][-1]


@pytest.mark.parametrize("device", DEVICES)
def test_torchscript_decodes_in_python_and_cpp(device, tmp_path):
    from test_torchscript_cpp import runner

    x, weight, bias, state = _prefilled(device)
    module = _Decoder(weight, bias, state.clone())
    module.example_inputs = [x[..., 2].cpu()]
    path = tmp_path / "decoder.pt"
    torch.jit.script(module).save(str(path))
    loaded = torch.jit.load(str(path), map_location=device)
    eager, want = _decodes_as_eager(loaded, x, weight, bias, state)
    torch.testing.assert_close(loaded.state, eager.state, rtol=0, atol=0)
    # The C++ app makes a warm-up call, then --repeats calls, of its example input, and writes the last output.
    out = tmp_path / "out.pt"
    result = subprocess.run([str(runner()), str(path), "--device", device, "--repeats", "2", "--output", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    torch.testing.assert_close(torch.load(out), want.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_aoti_package_decodes_in_python_and_cpp(device, tmp_path):
    """An AOTInductor package keeps the state buffer it updates from call to call, in Python and in the C++ app."""
    from test_aoti_cpp import run_runner

    x, weight, bias, state = _prefilled(device)
    path = customops.aoti.compile_package(_Decoder(weight, bias, state.clone()), [x[..., 2]], tmp_path / "dec.pt2")
    _, want = _decodes_as_eager(torch._inductor.aoti_load_package(str(path)), x, weight, bias, state)
    customops.aoti.save_inputs([x[..., 2]], tmp_path / "inputs.pt")
    out = tmp_path / "out.pt"
    done = run_runner(path, "--inputs", tmp_path / "inputs.pt", "--device", device, "--repeats", "2", "--output", out)
    assert done.returncode == 0, done.stderr
    torch.testing.assert_close(torch.load(out)[0], want.cpu(), rtol=0, atol=0)


# The in-place update under torch.compile and torch.export.

def test_compile_fullgraph_updates_the_state():
    torch._dynamo.reset()
    x, weight, bias = _sequence("cpu", L=6)

    def step(token, state):
        return customops.causal_conv1d_update(token, state, weight, bias, activation="silu") * 2

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    eager_state = torch.zeros(2, 6, 3)
    state = torch.zeros(2, 6, 3)
    for t in range(x.shape[-1]):
        torch.testing.assert_close(compiled(x[..., t], state), step(x[..., t], eager_state), rtol=0, atol=0)
        torch.testing.assert_close(state, eager_state, rtol=0, atol=0)
    explanation = torch._dynamo.explain(step)(x[..., 0], state.clone())
    assert explanation.graph_break_count == 0


def test_compile_inductor_updates_the_state():
    torch._dynamo.reset()
    x, weight, bias = _sequence("cpu", L=4)
    compiled = torch.compile(lambda token, state: customops.causal_conv1d_update(token, state, weight, bias),
                             fullgraph=True)
    state, eager_state = torch.zeros(2, 6, 5), torch.zeros(2, 6, 5)
    for t in range(x.shape[-1]):
        out = compiled(x[..., t], state)
        torch.testing.assert_close(out, customops.causal_conv1d_update(x[..., t], eager_state, weight, bias),
                                   rtol=0, atol=0)
    torch.testing.assert_close(state, eager_state, rtol=0, atol=0)


class DecodeStep(torch.nn.Module):
    def __init__(self, C=6, K=4, B=2):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(C, K))
        self.register_buffer("conv_state", torch.zeros(B, C, K - 1))

    def forward(self, token):
        return customops.causal_conv1d_update(token, self.conv_state, self.weight, activation="silu")


def test_export_shows_the_state_mutation():
    model = DecodeStep()
    with torch.no_grad():
        ep = torch.export.export(model, (torch.randn(2, 6),))
    # The functionalised graph (what ExecuTorch and AOTInductor lower; torch.export's own IR may keep the in-place
    # call as it is): the state is a mutated buffer, written by the op itself inside auto_functionalized.
    functional = ep.run_decompositions({})
    assert "conv_state" in functional.graph_signature.buffers_to_mutate.values(), functional
    assert "causal_conv1d.update" in functional.graph_module.code, functional.graph_module.code
    # The exported module updates its buffer as the eager one does.
    exported, eager = ep.module(), DecodeStep()
    eager.load_state_dict(model.state_dict())
    x, _, _ = _sequence("cpu", L=5)
    for t in range(x.shape[-1]):
        with torch.no_grad():
            torch.testing.assert_close(exported(x[..., t]), eager(x[..., t]), rtol=0, atol=0)
    torch.testing.assert_close(exported.conv_state, eager.conv_state, rtol=0, atol=0)


class FunctionalStep(torch.nn.Module):
    """The decoding step as ONNX can hold it: the training call with the state as an input and the next state as
    an output (docs/guide/ops.md), for a runtime without in-place updates."""

    def __init__(self, C=6, K=4):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(C, K))
        self.bias = torch.nn.Parameter(torch.randn(C))

    def forward(self, token, state):
        y, next_state = customops.causal_conv1d(token.unsqueeze(-1), self.weight, self.bias, activation="silu",
                                                initial_states=state, return_final_states=True)
        return y.squeeze(-1), next_state


def test_the_functional_step_equals_the_update_and_exports_to_onnx():
    step, token, state = FunctionalStep().eval(), torch.randn(2, 6), torch.randn(2, 6, 3)
    updated = state.clone()
    with torch.no_grad():
        out = customops.causal_conv1d_update(token, updated, step.weight, step.bias, activation="silu")
        y, next_state = step(token, state)
    torch.testing.assert_close(y, out, rtol=0, atol=0)
    torch.testing.assert_close(next_state, updated, rtol=0, atol=0)
    pytest.importorskip("onnxruntime")
    from customops import deploy

    report = deploy.check(step, (token, state))
    assert report.ok, report
