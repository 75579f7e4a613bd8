"""causal_conv1d with Mamba's arguments (activation, seq_idx, initial_states, return_final_states, the
channel-last layout): against the float64 reference of tests/python/op_db/causal_conv1d.py, its gradients, its
Meta kernel and schema, compile, autocast and the refusals."""

from __future__ import annotations

import pytest
import torch
from torch.testing import make_tensor

import customops
from conftest import cuda_kernel_names, requires_cuda
from op_db.causal_conv1d import _causal_conv1d_ref, mamba_samples

pytestmark = pytest.mark.torch_dependent

ops = torch.ops.customops
TOLERANCES = {torch.float64: (1e-10, 1e-12), torch.float32: (1e-5, 1e-5), torch.float16: (1e-2, 1e-2),
              torch.bfloat16: (5e-2, 5e-2)}
SAMPLES = list(mamba_samples("cpu", torch.float64, False))
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]


def _double(v):
    return v.detach().double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


def _channel_last(t):
    return t.dim() == 3 and t.stride(1) == 1 and t.stride(2) != 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
def test_matches_the_reference(device, dtype):
    for sample in mamba_samples(device, dtype, False):
        out = customops.causal_conv1d(*sample.args, **sample.kwargs)
        want = _causal_conv1d_ref(*map(_double, sample.args), **{k: _double(v) for k, v in sample.kwargs.items()})
        assert out.dtype == dtype and out.shape == want.shape and out.device == x_device(sample), sample.name
        rtol, atol = TOLERANCES[dtype]
        torch.testing.assert_close(out.double(), want, rtol=rtol, atol=atol, msg=lambda m: f"{sample.name}: {m}")
        # Mamba's layout is kept: a channel-last x gives a channel-last result; any other, a contiguous one.
        x = sample.args[0]
        if _channel_last(x):
            assert _channel_last(out), sample.name
        else:
            assert out.is_contiguous(), sample.name


def x_device(sample):
    return sample.args[0].device


def _differentiable(sample):
    """The sample's float64 tensors that require grad: x, weight, bias, initial_states where given."""
    x, w, b = sample.args
    init = sample.kwargs.get("initial_states")
    return [t for t in (x, w, b, init) if t is not None]


# Whole Jacobians: the long and the many-tile samples would take minutes and gigabytes (their gradients are
# checked against the reference's below).
GRADCHECKED = [s for s in SAMPLES if not s.name.startswith("mamba_long") and s.args[0].numel() <= 1024]


@pytest.mark.parametrize("sample", GRADCHECKED, ids=lambda s: s.name)
def test_gradcheck(sample):
    tensors = [t.detach().requires_grad_() for t in _differentiable(sample)]
    has_bias, has_init = sample.args[2] is not None, "initial_states" in sample.kwargs
    kwargs = {k: v for k, v in sample.kwargs.items() if k != "initial_states"}

    def f(*ts):
        x, w, *rest = ts
        b = rest.pop(0) if has_bias else None
        init = rest.pop(0) if has_init else None
        return customops.causal_conv1d(x, w, b, initial_states=init, **kwargs)

    assert torch.autograd.gradcheck(f, tensors)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gradients_match_the_reference(device, dtype):
    for sample in mamba_samples(device, dtype, True):
        out = customops.causal_conv1d(*sample.args, **sample.kwargs)
        if out.numel() == 0:
            continue
        ours = _differentiable(sample)
        grad = torch.randn(out.shape, dtype=torch.float64, device=device)
        got = torch.autograd.grad(out, ours, grad.to(dtype))
        refs = [t.detach().double().requires_grad_() for t in ours]
        x, w, *rest = refs
        b = rest.pop(0) if sample.args[2] is not None else None
        init = rest.pop(0) if "initial_states" in sample.kwargs else None
        kw = {k: v for k, v in sample.kwargs.items() if k != "initial_states"}
        want = torch.autograd.grad(_causal_conv1d_ref(x, w, b, initial_states=init, **kw), refs, grad)
        rtol, atol = TOLERANCES[dtype]
        # The weight and bias gradients sum every step: their size, not 1, sets the rounding.
        for i, (g, e) in enumerate(zip(got, want)):
            assert g.dtype == dtype and g.shape == e.shape, (sample.name, i)
            scale = max(1.0, e.abs().max().item()) if e.numel() else 1.0
            torch.testing.assert_close(g.double(), e, rtol=rtol * 4, atol=atol * 4 * scale,
                                       msg=lambda m: f"{sample.name} gradient {i}: {m}")
        if _channel_last(sample.args[0]):
            assert _channel_last(got[0]), f"{sample.name}: x's gradient lost the layout"


def test_final_states_carry_a_sequence_over_chunks():
    # Two chunks, the second started from the first's final states, give the whole sequence's result: the
    # property Mamba's chunked prefill relies on (checked between our calls, not against the reference).
    torch.manual_seed(0)
    for K, split in ((4, 5), (4, 2), (3, 1), (1, 3)):
        x, w, b = torch.randn(2, 3, 9, dtype=torch.float64), torch.randn(3, K, dtype=torch.float64), \
            torch.randn(3, dtype=torch.float64)
        whole, whole_state = customops.causal_conv1d(x, w, b, activation="silu", return_final_states=True)
        first, state = customops.causal_conv1d(x[..., :split], w, b, activation="silu", return_final_states=True)
        second, last = customops.causal_conv1d(x[..., split:], w, b, activation="silu", initial_states=state,
                                               return_final_states=True)
        torch.testing.assert_close(torch.cat([first, second], -1), whole, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(last, whole_state, rtol=0, atol=0)
        assert state.shape == (2, 3, K - 1)


def test_final_states_are_the_last_steps_and_differentiable():
    x = torch.arange(2 * 3 * 2, dtype=torch.float64).reshape(2, 3, 2).requires_grad_()
    init = -torch.arange(2 * 3 * 3, dtype=torch.float64).reshape(2, 3, 3).requires_grad_()
    w = torch.randn(3, 4, dtype=torch.float64)
    _, final = customops.causal_conv1d(x, w, initial_states=init, return_final_states=True)
    # K-1 = 3 steps from a 2-step x: the last initial state, then x's two steps.
    torch.testing.assert_close(final, torch.cat([init[..., 2:], x], -1), rtol=0, atol=0)
    _, final0 = customops.causal_conv1d(x, w, return_final_states=True)
    torch.testing.assert_close(final0[..., 0], torch.zeros(2, 3, dtype=torch.float64), rtol=0, atol=0)
    gx, gi = torch.autograd.grad(final.sum(), [x, init])
    assert gx.eq(1).all() and gi[..., 2].eq(1).all() and gi[..., :2].eq(0).all()


def test_seq_idx_keeps_sequences_apart():
    # A packed row gives what its sequences give one by one (from zeros each).
    torch.manual_seed(1)
    lengths = (3, 1, 6)
    x, w, b = (torch.randn(*shape, dtype=torch.float64) for shape in ((1, 4, 10), (4, 4), (4,)))
    seq = torch.cat([torch.full((n,), i, dtype=torch.int32) for i, n in enumerate(lengths)])[None]
    packed = customops.causal_conv1d(x, w, b, seq_idx=seq, activation="silu")
    apart = torch.cat([customops.causal_conv1d(part, w, b, activation="silu")
                       for part in x.split(lengths, dim=-1)], -1)
    torch.testing.assert_close(packed, apart, rtol=1e-12, atol=1e-12)


def test_differentiable_once():
    x = torch.randn(1, 2, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(customops.causal_conv1d(x, w, activation="silu").sum(), [x], create_graph=True)
    with pytest.raises(RuntimeError, match="differentiable once"):
        gx.sum().backward()


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.name)
def test_meta_and_opcheck(sample):
    args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in sample.args)
    kwargs = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in sample.kwargs.items()}
    out = ops.causal_conv1d.mamba(*args, **kwargs)
    meta = ops.causal_conv1d.mamba(*(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args),
                                   **{k: v.to("meta") if isinstance(v, torch.Tensor) else v
                                      for k, v in kwargs.items()})
    assert meta.shape == out.shape and meta.stride() == out.stride(), sample.name
    if sample.name.startswith("mamba_long"):
        return
    torch.library.opcheck(ops.causal_conv1d.mamba, args, kwargs,
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_compile_fullgraph():
    torch.manual_seed(2)
    x = torch.randn(2, 9, 5).transpose(1, 2)
    w, b, init = torch.randn(5, 4), torch.randn(5), torch.randn(2, 5, 3)
    seq = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 2, 2]] * 2, dtype=torch.int32)

    def f(x, w, b, init, seq):
        y, state = customops.causal_conv1d(x, w, b, activation="silu", initial_states=init, return_final_states=True)
        return y + customops.causal_conv1d(x, w, b, seq_idx=seq), state

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    for got, want in zip(compiled(x, w, b, init, seq), f(x, w, b, init, seq)):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_autocast_runs_in_the_low_precision_dtype():
    x = torch.randn(2, 4, 7)
    w = torch.randn(4, 4, requires_grad=True)
    init = torch.randn(2, 4, 3, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = customops.causal_conv1d(x, w, activation="silu", initial_states=init)
    assert out.dtype == torch.bfloat16
    gw, gi = torch.autograd.grad(out.float().sum(), [w, init])
    assert gw.dtype == torch.float32 and gi.dtype == torch.float32
    want = _causal_conv1d_ref(x.double(), w.double(), activation="silu", initial_states=init.double())
    torch.testing.assert_close(out.double(), want, rtol=5e-2, atol=5e-2)


def test_module_activation():
    m = customops.CausalConv1d(3, 4, activation="silu").double()
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    want = _causal_conv1d_ref(x, m.weight.detach(), m.bias.detach(), activation="silu")
    torch.testing.assert_close(m(x), want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(torch.jit.script(m)(x), want, rtol=1e-10, atol=1e-12)
    assert "activation='silu'" in repr(m)
    with pytest.raises(ValueError, match="activation must be None, 'silu' or 'swish', got 'gelu'"):
        customops.CausalConv1d(3, 4, activation="gelu")


def _refusals():
    x, w, b = torch.randn(2, 3, 8), torch.randn(3, 4), torch.randn(3)
    seq = torch.zeros(2, 8, dtype=torch.int32)
    init = torch.randn(2, 3, 3)
    yield dict(seq_idx=seq, initial_states=init), RuntimeError, "seq_idx and initial_states cannot be given together"
    yield dict(seq_idx=seq, return_final_states=True), ValueError, \
        "seq_idx and return_final_states cannot be given together"
    yield dict(activation="gelu"), RuntimeError, r'expected activation None, "silu" or "swish", got "gelu"'
    yield dict(seq_idx=seq.long()), RuntimeError, "expected seq_idx of dtype int32, got Long"
    yield dict(seq_idx=seq[:, :5]), RuntimeError, r"expected seq_idx of shape \(B, L\) = \(2, 8\), got \[2, 5\]"
    yield dict(initial_states=init[..., :2]), RuntimeError, \
        r"expected initial_states of shape \(B, C, K-1\) = \(2, 3, 3\), got \[2, 3, 2\]"
    yield dict(initial_states=init.double()), RuntimeError, "expected initial_states to have the dtype of x"
    yield dict(initial_states=init.long()), RuntimeError, "expected initial_states to be a floating-point tensor"
    return x, w, b


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_refusals_name_the_arguments(device):
    x, w, b = (t.to(device) for t in (torch.randn(2, 3, 8), torch.randn(3, 4), torch.randn(3)))
    for kwargs, error, message in _refusals():
        kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        with pytest.raises(error, match=message):
            customops.causal_conv1d(x, w, b, **kwargs)


def test_backward_op_checks_grad_out():
    x, w = torch.randn(2, 3, 8), torch.randn(3, 4)
    with pytest.raises(RuntimeError, match=r"expected grad_out of x's shape"):
        ops.causal_conv1d_backward.mamba(torch.randn(2, 3, 5), x, w, None, [True, True, False, False],
                                         activation="silu")
    gx, gw, gb, gi = ops.causal_conv1d_backward.mamba(torch.randn(2, 3, 8), x, w, None, [True, False, False, False])
    assert gx.shape == x.shape and gw is None and gb is None and gi is None


@requires_cuda
def test_cuda_matches_cpu_and_repeats_bitwise():
    # The CUDA kernels against the CPU kernels on a sample past one block of steps, and run twice: the weight and
    # bias gradients are reduced in a fixed order, so the same bits each run.
    torch.manual_seed(3)
    x = torch.randn(3, 700, 24).transpose(1, 2)
    w, b, init = torch.randn(24, 4), torch.randn(24), torch.randn(3, 24, 3)
    grad = torch.randn(3, 24, 700)

    def run(device):
        ts = [t.to(device).requires_grad_() for t in (x, w, b, init)]
        out = customops.causal_conv1d(ts[0], ts[1], ts[2], activation="silu", initial_states=ts[3])
        return [out, *torch.autograd.grad(out, ts, grad.to(device))]

    cpu, cuda, again = run("cpu"), run("cuda"), run("cuda")
    assert cuda[0].stride() == cpu[0].stride() and cuda[1].stride() == cpu[1].stride()
    for got, want, repeat in zip(cuda, cpu, again):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
        assert torch.equal(got, repeat)


@requires_cuda
def test_cuda_seq_idx_and_the_current_stream():
    seq = torch.tensor([[0, 0, 1, 1, 1, 2, 2, 2, 2]], dtype=torch.int32)
    x, w = torch.randn(1, 5, 9, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    want = _causal_conv1d_ref(x, w, seq_idx=seq, activation="silu")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        got = customops.causal_conv1d(x.cuda(), w.cuda(), seq_idx=seq.cuda(), activation="silu")
    stream.synchronize()
    torch.testing.assert_close(got.cpu(), want, rtol=1e-12, atol=1e-12)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("extra", ["silu_initial_states", "silu_seq_idx", "initial_states", "seq_idx"])
def test_cuda_channel_last_kernels_match_the_reference(dtype, width, extra):
    # Mamba's layout with whole 16-byte vectors of channels takes the tiled kernels (named channel_last): the
    # forward and every gradient against the float64 reference, over several tiles per row, sequence boundaries at
    # and beside the tiles' edges (multiples of 64) and elsewhere, and the same bits twice.
    cuts = torch.tensor([1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 129, 255, 256, 299])
    _check_channel_last(dtype, width, extra, 2, 32, 300, cuts)


@requires_cuda
@pytest.mark.parametrize("extra", ["silu_initial_states", "silu_seq_idx", "initial_states", "seq_idx"])
def test_cuda_channel_last_blocks_take_several_tiles(extra):
    # The backward launches one wave of blocks, each taking tiles of steps in turn: rows long enough for two tiles
    # a block or more wherever a multiprocessor holds up to 12 of them (float32's: 3 on an H100).
    B = 2
    L = 64 * 24 * torch.cuda.get_device_properties(0).multi_processor_count // B + 37
    _check_channel_last(torch.float32, 4, extra, B, 64, L, torch.arange(63, L, 997))


def _check_channel_last(dtype, width, extra, B, C, L, cuts):
    gen = torch.Generator().manual_seed(width)
    x = torch.randn(B, L, C, generator=gen).to("cuda", dtype).transpose(1, 2).requires_grad_()
    w = (torch.randn(C, width, generator=gen) / 2).to("cuda", dtype).requires_grad_()
    b = torch.randn(C, generator=gen).to("cuda", dtype).requires_grad_()
    kwargs = {"activation": "silu" if extra.startswith("silu") else None}
    leaves = [x, w, b]
    if extra.endswith("seq_idx"):
        row = (torch.arange(L)[:, None] >= cuts).sum(1).to(torch.int32)
        kwargs["seq_idx"] = torch.stack([row, row.flip(0).neg() + row.max()]).contiguous().cuda()
    else:
        kwargs["initial_states"] = torch.randn(B, width - 1, C, generator=gen).to("cuda", dtype).transpose(1, 2)
        kwargs["initial_states"].requires_grad_()
        leaves.append(kwargs["initial_states"])
    grad = torch.randn(B, L, C, generator=gen).to("cuda", dtype).transpose(1, 2)

    def run():
        out = customops.causal_conv1d(x, w, b, **kwargs)
        return [out, *torch.autograd.grad(out, leaves, grad)]

    names = cuda_kernel_names(run)
    assert any("channel_last" in n for n in names), sorted(set(names))
    got, again = run(), run()
    refs = [t.detach().cpu().double().requires_grad_() for t in leaves]
    ref_kwargs = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    if "initial_states" in ref_kwargs:
        ref_kwargs["initial_states"] = refs[3]
    want_out = _causal_conv1d_ref(refs[0], refs[1], refs[2], **ref_kwargs)
    want = [want_out.detach(), *torch.autograd.grad(want_out, refs, grad.cpu().double())]
    assert _channel_last(got[0]) and _channel_last(got[1])
    rtol, atol = TOLERANCES[dtype]
    for i, (g, e, r) in enumerate(zip(got, want, again)):
        scale = max(1.0, e.abs().max().item())
        torch.testing.assert_close(g.cpu().double(), e, rtol=rtol, atol=atol * scale, msg=lambda m: f"result {i}: {m}")
        assert torch.equal(g, r), f"result {i} differs between two runs"
