"""Generic tests, each run over every operator in op_db.OP_DB."""

from __future__ import annotations

import functools
import io
import os

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch._dynamo.utils import counters

from conftest import HAS_CUDA, requires_cuda
from op_db import OP_DB, OpInfo, SampleInput

pytestmark = pytest.mark.torch_dependent


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def op_device_dtype_params():
    for op in OP_DB:
        for device in ("cpu", "cuda"):
            for dtype in op.dtypes.get(device, ()):
                marks = [requires_cuda] if device == "cuda" else []
                yield pytest.param(op, device, dtype, marks=marks, id=f"{op}-{device}-{_dtype_name(dtype)}")


def op_device_params():
    for op in OP_DB:
        yield pytest.param(op, "cpu", id=f"{op}-cpu")
        yield pytest.param(op, "cuda", marks=[requires_cuda], id=f"{op}-cuda")


def call(op: OpInfo, sample: SampleInput):
    return op.op(*sample.args, **sample.kwargs)


def _to_reference(sample: SampleInput) -> SampleInput:
    """The same inputs (same rounded values and layout) in float64."""

    def conv(a):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            return a.detach().to(torch.float64).requires_grad_(a.requires_grad)
        return a

    return SampleInput(tuple(conv(a) for a in sample.args), {k: conv(v) for k, v in sample.kwargs.items()},
                       sample.name)


def _grad_inputs(sample: SampleInput) -> list[torch.Tensor]:
    return [t for t in sample.tensors() if t.requires_grad]


def _small(sample: SampleInput, limit: int = 512) -> bool:
    return sum(t.numel() for t in sample.tensors()) <= limit


def _overlapping(sample: SampleInput) -> bool:
    """Expanded inputs: gradcheck cannot perturb one element of them alone."""
    return any(st == 0 and sz > 1 for t in sample.tensors() for st, sz in zip(t.stride(), t.shape))


def _strictly_channels_last(t: torch.Tensor) -> bool:
    """Channels_last strides that contiguous ones do not also describe."""
    return t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


def _check_memory_format(op: OpInfo, sample: SampleInput, out: torch.Tensor, what: str) -> None:
    x = sample.tensors()[0]
    if op.keeps_memory_format and _strictly_channels_last(x) and out.dim() == 4 and out.numel() > 0:
        assert out.is_contiguous(memory_format=torch.channels_last), f"{sample.name}: {what} is not channels_last"


def _check_against_reference(op: OpInfo, sample: SampleInput, ref_sample: SampleInput, out: torch.Tensor,
                             tolerance_dtype: torch.dtype) -> None:
    """out and the gradients of sample's inputs against the float64 reference
    evaluated on ref_sample; each gradient has its input's dtype."""
    rtol, atol = op.tolerances[tolerance_dtype]
    expected = op.ref(*ref_sample.args, **ref_sample.kwargs)
    torch.testing.assert_close(out.double(), expected, rtol=rtol, atol=atol, msg=lambda m: f"{sample.name}: {m}")
    _check_memory_format(op, sample, out, "the output")
    inputs = _grad_inputs(sample)
    if not inputs or out.numel() == 0:
        return
    grad = torch.randn_like(out)  # in the output's layout, as the next layer's gradient would be
    grads = torch.autograd.grad(out, inputs, grad)
    ref_grads = torch.autograd.grad(expected, _grad_inputs(ref_sample), grad.double())
    for t, g, rg in zip(inputs, grads, ref_grads):
        assert g.dtype == t.dtype, f"{sample.name}: a {t.dtype} input got a {g.dtype} gradient"
        # An element of a gradient sums terms about as large as the gradient's largest, and the half types round
        # each: its error scales with them, not with what cancellation leaves (PyTorch's own bfloat16 convolution
        # is 0.12 off where an input's gradient reaches 45).
        scale = max(1.0, rg.abs().max().item()) if rg.numel() else 1.0
        torch.testing.assert_close(g.double(), rg, rtol=rtol, atol=atol * scale,
                                   msg=lambda m: f"{sample.name} (gradient): {m}")
    _check_memory_format(op, sample, grads[0], "the input's gradient")


@pytest.mark.parametrize("op,device,dtype", list(op_device_dtype_params()))
def test_matches_reference(op: OpInfo, device, dtype):
    """Forward and gradients against the plain-PyTorch reference in float64;
    channels_last results where PyTorch's counterpart keeps the layout."""
    for sample in op.sample_inputs(device, dtype, True):
        out = call(op, sample)
        assert out.dtype == dtype and out.device.type == device, sample.name
        _check_against_reference(op, sample, _to_reference(sample), out, dtype)


def autocast_params():
    for op in OP_DB:
        for device, low in (("cpu", torch.bfloat16), ("cuda", torch.float16), ("cuda", torch.bfloat16)):
            marks = [requires_cuda] if device == "cuda" else []
            yield pytest.param(op, device, low, marks=marks, id=f"{op}-{device}-{_dtype_name(low)}")


def _autocast_samples(op: OpInfo, device, low):
    float_samples = [s for s in op.sample_inputs(device, torch.float32, True) if "channels_last" in s.name]
    return [*op.autocast_samples(device, low, True), *float_samples[:2]]


def _as_autocast_casts(op: OpInfo, sample: SampleInput, low) -> SampleInput:
    """The float64 reference inputs: the values the op sees under autocast."""

    def cast(a):
        if not (isinstance(a, torch.Tensor) and a.is_floating_point()):
            return a
        seen = a.detach().to(low) if op.autocast == "lower_precision" and a.dtype != torch.float64 else a.detach()
        return seen.to(torch.float64).requires_grad_(a.requires_grad)

    return SampleInput(tuple(cast(a) for a in sample.args), {k: cast(v) for k, v in sample.kwargs.items()},
                       sample.name)


@pytest.mark.parametrize("op,device,low", list(autocast_params()))
def test_autocast(op: OpInfo, device, low):
    """Under torch.autocast the op runs in the dtype its PyTorch counterpart
    would (the autocast dtype, or its first input's), matches the reference on
    the values it sees, gives each input a gradient of that input's dtype
    (float32 parameters get float32 gradients), and compiles to the same."""
    samples = _autocast_samples(op, device, low)
    assert samples
    for sample in samples:
        with torch.autocast(device, dtype=low):
            out = call(op, sample)
        first = sample.tensors()[0]
        want = compute = low if op.autocast == "lower_precision" else first.dtype
        if op.autocast == "promote":  # as a * b: the widest floating input's dtype; gradients in each input's
            floating = [t.dtype for t in sample.tensors() if t.is_floating_point()]
            want = functools.reduce(torch.promote_types, floating)
            compute = min(floating, key=lambda d: torch.finfo(d).bits)
        assert out.dtype == want, f"{sample.name}: ran in {out.dtype}, expected {want}"
        _check_against_reference(op, sample, _as_autocast_casts(op, sample, low), out, compute)

    sample = next(s for s in samples if all(t.numel() > 0 for t in s.tensors()))
    torch._dynamo.reset()
    compiled = torch.compile(functools.partial(op.op, **sample.kwargs), fullgraph=True)
    with torch.autocast(device, dtype=low):
        eager, got = op.op(*sample.args, **sample.kwargs), compiled(*sample.args)
    assert got.dtype == eager.dtype
    # Within the op's tolerances: a compiled graph may round where the kernels do not (a convolution's bias added
    # to its rounded result, as Inductor does for nn.Conv2d on GPUs).
    rtol, atol = op.tolerances[low]
    torch.testing.assert_close(got, eager, rtol=rtol, atol=atol, msg=lambda m: f"{sample.name} (compiled): {m}")


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_gradcheck(op: OpInfo, device):
    """Analytical against numerical gradients in float64 (and second order). CUSTOMOPS_GRADCHECK_FAST=1 (the oldest
    torch's CI leg) compares them along random directions (gradcheck's fast mode) instead of whole Jacobians."""
    checked = 0
    fast = os.environ.get("CUSTOMOPS_GRADCHECK_FAST") == "1"
    for sample in op.sample_inputs(device, torch.float64, True):
        if not _grad_inputs(sample) or not _small(sample) or _overlapping(sample):
            continue
        fn = functools.partial(op.op, **sample.kwargs)
        assert torch.autograd.gradcheck(fn, sample.args, fast_mode=fast), sample.name
        if op.supports_gradgrad and "gradgrad" not in sample.skips:
            assert torch.autograd.gradgradcheck(fn, sample.args, fast_mode=fast), sample.name
        checked += 1
    assert checked > 0


def _opcheck_samples(op: OpInfo, device):
    picked = [s for s in op.sample_inputs(device, torch.float32, True) if _small(s, 4096)]
    # Every distinct layout is worth checking (strides must match fake tensors), of every overload.
    overloads = dict.fromkeys(s.overload for s in picked)
    return [s for o in overloads for s in [s for s in picked if s.overload == o][:8]]


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_opcheck(op: OpInfo, device):
    """torch.library.opcheck: schema, autograd registration, fake tensors, AOT dispatch."""
    for sample in _opcheck_samples(op, device):
        torch.library.opcheck(op.overload_of(sample), sample.args, sample.kwargs)
        out = call(op, sample)
        grad = torch.randn_like(out)
        # aot_dispatch differentiates the backward op too: not for a form differentiable once.
        checks = ("test_schema", "test_autograd_registration", "test_faketensor")
        torch.library.opcheck(*op.backward_call(sample, grad),
                              **({"test_utils": checks} if "gradgrad" in sample.skips else {}))


def _outputs(result) -> list[torch.Tensor]:
    results = result if isinstance(result, (tuple, list)) else (result,)
    return [t for t in results if isinstance(t, torch.Tensor)]


def _assert_same_layouts(real, fake, what: str) -> None:
    real, fake = _outputs(real), _outputs(fake)
    assert len(real) == len(fake), what
    for i, (r, f) in enumerate(zip(real, fake)):
        assert (f.shape, f.dtype) == (r.shape, r.dtype), f"{what}, output {i}"
        # As Inductor's own checks: an empty tensor's strides address nothing, nor does a size-1 dimension's.
        significant = [d for d in range(r.dim()) if r.shape[d] > 1]
        if r.numel() > 0 and any(f.stride(d) != r.stride(d) for d in significant):
            raise AssertionError(f"{what}, output {i}: fake strides {f.stride()}, real {r.stride()}")


@pytest.mark.parametrize("op,device,dtype", list(op_device_dtype_params()))
def test_fake_kernels_give_the_real_strides(op: OpInfo, device, dtype):
    """torch.compile plans every buffer from the fake (Meta) kernels, and the ops' flexible_layout tag lets
    Inductor hand them whichever layout it chose: for every input layout the fake kernels must give each
    output exactly the strides the real kernels give, forward and backward."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()

    def fake(args):
        return tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)

    def fake_kwargs(kwargs):
        return dict(zip(kwargs, fake(kwargs.values())))

    for sample in op.sample_inputs(device, dtype, False):
        overload = op.overload_of(sample)
        real = overload(*sample.args, **sample.kwargs)
        with mode:
            faked = overload(*fake(sample.args), **fake_kwargs(sample.kwargs))
        _assert_same_layouts(real, faked, sample.name)
        grad = torch.randn_like(real)
        backward, backward_args, backward_kwargs = op.backward_call(sample, grad)
        real_grads = backward(*backward_args, **backward_kwargs)
        with mode:
            fake_grads = backward(*fake(backward_args), **fake_kwargs(backward_kwargs))
        _assert_same_layouts(real_grads, fake_grads, f"{sample.name} (backward)")


def backend_params():
    import customops

    for op in OP_DB:
        if op.name in customops.backends.ops():
            for backend in ("customops", "pytorch"):
                for dtype in op.dtypes.get("cuda", ()):
                    yield pytest.param(op, backend, dtype, marks=[requires_cuda],
                                       id=f"{op}-cuda-{backend}-{_dtype_name(dtype)}")


@pytest.mark.parametrize("op,backend,dtype", list(backend_params()))
def test_every_backend_matches_reference(op: OpInfo, backend, dtype):
    """Ops that run PyTorch's kernels where those are faster (customops.backends): every sample through each
    choice, values, gradients and the layouts the fake kernels promise."""
    import customops

    with customops.backends.use(op.name, backend):
        test_matches_reference(op, "cuda", dtype)
        test_fake_kernels_give_the_real_strides(op, "cuda", dtype)


@pytest.mark.every_op
def test_every_op_leaves_inductor_free_to_choose_layouts():
    # Without the tag Inductor pins each custom op's inputs to the strides seen while tracing, and copies
    # around it once its layout optimisation has made the convolutions around it channels_last.
    for op in OP_DB:
        for overload in (op.overload, op.backward_overload):
            assert torch.Tag.flexible_layout in overload.tags, overload


def _graphs_compiled() -> int:
    """The graphs Dynamo has compiled in this process: one per frame, and one more per recompile. Not the calls of
    the backend, which a restart of the analysis repeats within one compile: under dynamic=True a float argument of
    a custom op is symbolic, Inductor's _tensorify_python_scalars cannot keep it so and compiles the frame again
    with the float specialized (torch 2.15), which a backend's counter (CompileCounter.frame_count) takes for a
    second compile."""
    return counters["stats"]["unique_graphs"]


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_compile_fullgraph_dynamic(op: OpInfo, device):
    """One graph (no break, no recompile) serves several sizes, forward and backward, in the op's widest float
    dtype: float64's tolerances catch a size-derived scalar that the generated code computes in float32."""
    torch._dynamo.reset()
    compiled = torch.compile(op.op, fullgraph=True, dynamic=True)
    dtype = torch.float64 if torch.float64 in op.dtypes[device] else torch.float32
    before = _graphs_compiled()
    for sample in op.dynamic_samples(device, dtype):
        eager_in = [t.detach().requires_grad_(t.is_floating_point()) for t in sample.tensors()]
        comp_in = [t.detach().requires_grad_(t.is_floating_point()) for t in sample.tensors()]

        def rebuild(tensors):
            it = iter(tensors)
            return tuple(next(it) if isinstance(a, torch.Tensor) else a for a in sample.args)

        expected = op.op(*rebuild(eager_in), **sample.kwargs)
        actual = compiled(*rebuild(comp_in), **sample.kwargs)
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{sample.name}: {m}")
        grad = torch.randn_like(expected)
        want = [t for t in eager_in if t.requires_grad]
        got = [t for t in comp_in if t.requires_grad]
        for g, w in zip(torch.autograd.grad(actual, got, grad), torch.autograd.grad(expected, want, grad)):
            torch.testing.assert_close(g, w, msg=lambda m: f"{sample.name} (gradient): {m}")
    assert _graphs_compiled() - before == 1, f"compiled {_graphs_compiled() - before} graphs"


# An op with a float argument, as a C++ op's `float` reaches Dynamo: what makes Inductor restart its analysis.
@torch.library.custom_op("customops_tests::scaled", mutates_args=())
def _scaled(x: torch.Tensor, c: float) -> torch.Tensor:
    return x * c


_scaled.register_fake(lambda x, c: torch.empty_like(x))
_scaled.register_autograd(lambda ctx, g: (_scaled(g, ctx.c), None),
                          setup_context=lambda ctx, inputs, output: setattr(ctx, "c", inputs[1]))


def test_compile_count_is_graphs_not_restarts():
    torch._dynamo.reset()
    backend = CompileCounterWithBackend("inductor")
    compiled = torch.compile(lambda x, c: _scaled(x, c), fullgraph=True, dynamic=True, backend=backend)
    before = _graphs_compiled()
    for n in (5, 7, 9):
        x = torch.randn(n, dtype=torch.float64, requires_grad=True)
        compiled(x, 0.5).sum().backward()
        torch.testing.assert_close(x.grad, torch.full_like(x, 0.5))
    assert _graphs_compiled() - before == 1, \
        f"compiled {_graphs_compiled() - before} graphs ({backend.frame_count} calls of the backend)"
    # A recompile is counted: another dtype is another graph.
    compiled(torch.randn(5), 0.5)
    assert _graphs_compiled() - before == 2


def _first_nonempty(op: OpInfo, device, dtype=torch.float32) -> SampleInput:
    return next(s for s in op.sample_inputs(device, dtype, False)
                if all(t.numel() > 0 for t in s.tensors()) and s.tensors()[0].dim() > 0)


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_torchscript_save_load(op: OpInfo, device):
    """The op's nn.Module scripts, saves and loads, and gives the functional's result."""
    module, inputs = op.module(_first_nonempty(op, device))
    scripted = torch.jit.script(module)
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)
    buffer.seek(0)
    loaded = torch.jit.load(buffer, map_location=device)
    expected = module(*inputs)
    torch.testing.assert_close(loaded(*inputs), expected)
    torch.testing.assert_close(scripted(*inputs), expected)


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_export(op: OpInfo, device):
    """torch.export keeps the op as one node of the exported graph."""
    module, inputs = op.module(_first_nonempty(op, device))
    program = torch.export.export(module, tuple(inputs))
    targets = [node.target for node in program.graph.nodes if node.op == "call_function"]
    assert op.overload in targets, targets
    torch.testing.assert_close(program.module()(*inputs), module(*inputs))


@requires_cuda
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_cpu_cuda_agree(op: OpInfo):
    for dtype in set(op.dtypes["cpu"]) & set(op.dtypes["cuda"]):
        rtol, atol = op.tolerances[dtype]
        for sample in op.sample_inputs("cpu", dtype, False):
            moved = SampleInput(tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in sample.args),
                                {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in sample.kwargs.items()},
                                sample.name, sample.overload, sample.skips)
            torch.testing.assert_close(call(op, moved).cpu(), call(op, sample), rtol=rtol, atol=atol,
                                       msg=lambda m: f"{sample.name} {dtype}: {m}")


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_error_inputs(op: OpInfo, device):
    """Bad inputs raise an error whose message names the argument."""
    inputs = list(op.error_inputs(device))
    assert inputs
    for ei in inputs:
        fn = op.backward_overload if ei.backward else op.op
        with pytest.raises(ei.error, match=ei.match):
            fn(*ei.sample.args, **ei.sample.kwargs)


@pytest.mark.parametrize("op,device", list(op_device_params()))
def test_backend_kernels_name_a_missing_tensor(op: OpInfo, device):
    """None for a required tensor, forward op and backward op, under inference_mode, where the backends' kernels
    take the call without the Autograd kernel's checks first: the error names the argument."""
    sample = next(iter(op.sample_inputs(device, torch.float32, False)))
    grad = torch.ones_like(op.overload(*sample.args, **sample.kwargs))
    calls = [(op.overload, list(sample.args), sample.kwargs),
             (op.backward_overload, list(op.backward_args(sample, grad)), {})]
    checked = 0
    for fn, args, kwargs in calls:
        schema = fn._schema.arguments
        if sum(isinstance(a, torch.Tensor) for a in args) < 2:
            continue  # with no tensor left the dispatcher finds no kernel (its own error)
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor) or isinstance(schema[i].type, torch.OptionalType):
                continue
            bad = args[:i] + [None] + args[i + 1:]
            with torch.inference_mode(), pytest.raises(RuntimeError, match=rf"expected {schema[i].name} to be a "
                                                                          "tensor, got None"):
                fn(*bad, **kwargs)
            checked += 1
    if not checked:
        pytest.skip("one tensor argument: without it the dispatcher has no kernel to call")


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_error_inputs_on_meta(op: OpInfo):
    """The Meta kernels (what torch.compile traces) reject the same inputs."""
    for ei in op.error_inputs("cpu"):
        if any(t.device.type != "cpu" for t in ei.sample.tensors()):
            continue  # device mismatches do not exist on one fake device
        args = tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in ei.sample.args)
        fn = op.backward_overload if ei.backward else op.op
        with pytest.raises(ei.error, match=ei.match):
            fn(*args, **ei.sample.kwargs)


def test_cuda_tests_skip_cleanly_without_gpu():
    """On a machine without CUDA the CUDA parametrisations must be skipped, not fail."""
    params = list(op_device_params())
    cuda_params = [p for p in params if "cuda" in p.id]
    assert cuda_params
    for p in cuda_params:
        assert any(m.name == "skipif" and m.args[0] == (not HAS_CUDA) for m in p.marks)
