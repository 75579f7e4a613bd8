"""depthwise_conv2d in compiled graphs: each pass where eager runs it (customops.inductor.conv).

The choice is tested like a kernel: on the CPU, the traced graphs of CUDA-shaped fake tensors hold ATen's
convolution where the rule (or a forced policy) says PyTorch and the op elsewhere, with the bias add and the bias
gradient outside the op; both branches compute the convolution and its gradients (against float64); and
Inductor's generated code keeps the bias out of the op. On a GPU, benchmark mode's timed choices decide."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch._inductor.decomposition import select_decomp_table
from torch._inductor.utils import run_and_get_code
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import customops
import customops.inductor as inductor
from customops.inductor import conv as family
from conftest import HAS_CUDA
from op_db import OP_DB

pytestmark = pytest.mark.torch_dependent

OP = next(op for op in OP_DB if op.name == "depthwise_conv2d")
ops, aten = torch.ops.customops, torch.ops.aten
PASSES = ("forward", "input_grad", "weight_grad")

# Depthwise layers of the zoo's kinds (channels, plane, taps, stride), batch 128 unless given: between them the
# rule gives every pass to each side at least once (checked below, so that the test cannot pass vacuously).
LAYERS = [
    (torch.bfloat16, True, (128, 96, 56, 56), 3, 1),
    (torch.bfloat16, True, (128, 144, 56, 56), 3, 2),
    (torch.bfloat16, True, (128, 240, 28, 28), 5, 1),
    (torch.bfloat16, True, (128, 672, 14, 14), 5, 2),
    (torch.bfloat16, True, (128, 40, 56, 56), 7, 1),
    (torch.bfloat16, True, (64, 48, 7, 7), 3, 1),
    (torch.float32, False, (128, 96, 56, 56), 3, 1),
    (torch.float32, False, (128, 144, 56, 56), 3, 2),
    (torch.float32, False, (128, 320, 7, 7), 7, 1),
    (torch.float32, False, (128, 72, 56, 56), 9, 2),
]


def _traced(dtype, channels_last, shape, taps, stride):
    """The forward and backward graphs Inductor receives for the layer (with bias), traced on fake CUDA tensors
    with Inductor's decompositions."""
    n, c, h, w = shape
    out = [(size + 2 * (taps // 2) - taps) // stride + 1 for size in (h, w)]
    with FakeTensorMode():
        x = torch.empty(shape, device="cuda", dtype=dtype)
        g = torch.empty(n, c, *out, device="cuda", dtype=dtype)
        if channels_last:
            x, g = (t.contiguous(memory_format=torch.channels_last) for t in (x, g))
        weight = torch.empty(c, 1, taps, taps, device="cuda", dtype=dtype)
        bias = torch.empty(c, device="cuda", dtype=dtype)
    geometry = ([stride] * 2, [taps // 2] * 2, [1, 1])
    forward = make_fx(lambda x, w, b: ops.depthwise_conv2d(x, w, b, *geometry),
                      decomposition_table=select_decomp_table(), tracing_mode="fake")(x, weight, bias)
    backward = make_fx(lambda g, x, w: ops.depthwise_conv2d_backward(g, x, w, *geometry, [True, True, True]),
                       decomposition_table=select_decomp_table(), tracing_mode="fake")(g, x, weight)
    return forward.graph, backward.graph


def _calls(graph, target):
    return [n for n in graph.nodes if n.target is target]


def _where_each_pass_runs(forward, backward) -> dict:
    """Per pass, "pytorch" or "customops", read from the graphs; asserts that each pass is computed once and
    that the bias never goes through the op."""
    runs = {}
    theirs, ours = _calls(forward, aten.convolution.default), _calls(forward, ops.depthwise_conv2d.default)
    assert len(theirs) + len(ours) == 1, forward
    if theirs:
        runs["forward"] = "pytorch"
    else:
        assert ours[0].args[2] is None, "the op got the bias"
        assert _calls(forward, aten.add.Tensor), "no bias add beside the op"
        runs["forward"] = "customops"
    for target, side in ((aten.convolution_backward.default, "pytorch"),
                         (ops.depthwise_conv2d_backward.default, "customops")):
        for node in _calls(backward, target):
            mask = node.args[-1]
            assert not mask[2], f"{target} computes the bias gradient: {backward}"
            for i, p in ((0, "input_grad"), (1, "weight_grad")):
                if mask[i]:
                    assert p not in runs, f"{p} computed twice: {backward}"
                    runs[p] = side
    # The bias gradient: a sum of the output gradient over the batch and the plane, which Inductor generates.
    sums = [n for n in _calls(backward, aten.sum.dim_IntList) if list(n.args[1]) == [0, 2, 3]]
    assert len(sums) == 1, backward
    return runs


@pytest.mark.parametrize("layer", LAYERS, ids=lambda l: f"{l[0]}-{'cl' if l[1] else 'nchw'}-{l[2]}-k{l[3]}s{l[4]}")
def test_each_pass_runs_where_the_rule_puts_it(layer):
    dtype, channels_last, shape, taps, stride = layer
    rule = customops.backends.depthwise_conv2d_rule(shape, (shape[1], 1, taps, taps), dtype, channels_last, True,
                                                    stride, taps // 2, 1)
    assert _where_each_pass_runs(*_traced(*layer)) == rule


def test_the_layers_give_each_pass_to_both_sides():
    seen = {p: set() for p in PASSES}
    for dtype, channels_last, shape, taps, stride in LAYERS:
        rule = customops.backends.depthwise_conv2d_rule(shape, (shape[1], 1, taps, taps), dtype, channels_last,
                                                        True, stride, taps // 2, 1)
        for p in PASSES:
            seen[p].add(rule[p])
    assert all(sides == {"customops", "pytorch"} for sides in seen.values()), seen


@pytest.mark.parametrize("policy", ["customops", "pytorch"])
def test_a_forced_policy_decides_every_pass(policy):
    with customops.backends.use("depthwise_conv2d", policy):
        for layer in LAYERS[:3]:
            assert _where_each_pass_runs(*_traced(*layer)) == dict.fromkeys(PASSES, policy)


def test_cpu_graphs_keep_the_op_with_its_bias_outside():
    x, w, b = torch.randn(2, 8, 9, 9), torch.randn(8, 1, 3, 3), torch.randn(8)
    g = torch.randn(2, 8, 9, 9)
    geometry = ([1, 1], [1, 1], [1, 1])
    forward = make_fx(lambda x, w, b: ops.depthwise_conv2d(x, w, b, *geometry),
                      decomposition_table=select_decomp_table())(x, w, b)
    backward = make_fx(lambda g, x, w: ops.depthwise_conv2d_backward(g, x, w, *geometry, [True, True, True]),
                       decomposition_table=select_decomp_table())(g, x, w)
    assert _where_each_pass_runs(forward.graph, backward.graph) == dict.fromkeys(PASSES, "customops")


def test_benchmark_mode_times_a_new_shape_when_tracing(monkeypatch):
    # No GPU here: the eager timing is replaced by a record of what it was asked; with nothing timed, each pass
    # falls back to the rule, as eager does where it cannot time.
    asked = []
    monkeypatch.setattr(family, "_time_eagerly", lambda call, x, device, untimed: asked.append(list(untimed)))
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    layer = LAYERS[0]
    dtype, channels_last, shape, taps, stride = layer
    rule = customops.backends.depthwise_conv2d_rule(shape, (shape[1], 1, taps, taps), dtype, channels_last, True,
                                                    stride, taps // 2, 1)
    assert _where_each_pass_runs(*_traced(*layer)) == rule
    assert asked == [[True, True, True]] * 2  # the forward's trace and the backward's
    asked.clear()
    with customops.backends.use("depthwise_conv2d", "pytorch"):
        _traced(*layer)
    assert asked == [], "a forced policy times nothing"
    torch.use_deterministic_algorithms(True)
    try:
        assert _where_each_pass_runs(*_traced(*layer)) == rule
    finally:
        torch.use_deterministic_algorithms(False)
    assert asked == [], "deterministic algorithms time nothing"


def test_a_stride_past_the_input_reaches_pytorch_just_past_the_last_window():
    # One output along each axis: PyTorch's kernels get the stride just past the last window's start (they hold
    # strides in 32 bits), and the dilation of an axis of one tap is 1.
    with FakeTensorMode():
        x = torch.empty(3, 3, 5, device="cuda")
        w = torch.empty(3, 1, 2, 1, device="cuda")
    call = family._Call(x, w, [2**63 - 1] * 2, [0, 1], [1, 2**62])
    assert call.pytorch_can_run and call.window_stride == [2, 7] and call.window_dilation == [1, 1]
    with customops.backends.use("depthwise_conv2d", "pytorch"):
        assert family.passes(x, w, [2**63 - 1] * 2, [0, 1], [1, 2**62]) == ["pytorch"] * 3


# --- both branches compute the convolution (CPU, with the choice forced per pass) ------------------------------

PICKS = [("pytorch", "customops", "pytorch"), ("customops", "pytorch", "customops"), ("pytorch",) * 3]
SAMPLES = ("3x3_pad1", "multiplier_asymmetric", "unbatched_no_bias", "batch0", "odd_sizes", "k31",
           "one_row_filter_huge_dilation", "unbatched_stride_past_the_input", "noncontiguous", "channels_last_k3",
           "channels_last_multiplier_strided", "channels_last_permuted")


def _decomposed_backend():
    """A torch.compile backend that runs the graphs Inductor would receive (its decompositions applied), as they
    are: the decompositions' values, without code generation."""
    def run(gm, _):
        return make_boxed_func(gm)

    return aot_autograd(fw_compiler=run, bw_compiler=run, decompositions=select_decomp_table())


def _against_float64(sample, compiled):
    tensors = [t.detach().requires_grad_() if t is not None else None for t in sample.args]
    out = compiled(*tensors, **sample.kwargs)
    wanted = [t for t in tensors if t is not None]
    grad = torch.randn_like(out)
    grads = torch.autograd.grad(out, wanted, grad)
    ref_in = [t.detach().double().requires_grad_() if t is not None else None for t in sample.args]
    ref = OP.ref(*ref_in, **sample.kwargs)
    ref_grads = torch.autograd.grad(ref, [t for t in ref_in if t is not None], grad.double())
    rtol, atol = OP.tolerances[out.dtype]
    torch.testing.assert_close(out, ref.to(out.dtype), rtol=rtol, atol=atol)
    assert out.is_contiguous(memory_format=torch.channels_last) == ref.is_contiguous(memory_format=torch.channels_last)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r.to(g.dtype), rtol=rtol, atol=atol)


@pytest.mark.parametrize("picks", PICKS, ids="-".join)
def test_both_branches_compute_the_convolution_and_its_gradients(picks, monkeypatch):
    monkeypatch.setattr(family, "_CHOOSING_DEVICES", ("cpu", "cuda"))
    monkeypatch.setattr(family, "_choose", lambda call, x: list(picks))
    samples = {s.name: s for s in OP.sample_inputs("cpu", torch.float32, False)}
    assert set(SAMPLES) <= set(samples), set(SAMPLES) - set(samples)
    backend = _decomposed_backend()
    for name in SAMPLES:
        torch._dynamo.reset()
        compiled = torch.compile(lambda *a, **k: ops.depthwise_conv2d(*a, **k), backend=backend, fullgraph=True)
        try:
            _against_float64(samples[name], compiled)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from e
    torch._dynamo.reset()


def test_a_symbolic_size_is_read_by_its_hint_without_a_guard():
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    env = ShapeEnv()
    n = env.create_symintnode(env.create_symbol(5, ConstantSource("n"), dynamic_dim=DimDynamic.DYNAMIC), hint=5)
    assert family._hint(n * 2) == 10 and family._hint(7) == 7
    assert not env.guards
    assert family._hint(env.create_unbacked_symint()) == 8192  # data-dependent: counted as large


# --- Inductor's code on the CPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("decompose", [True, False], ids=["decomposed", "kept"])
def test_inductor_code_adds_the_bias_outside_the_op(decompose):
    x = torch.randn(2, 8, 9, 9, requires_grad=True)
    w, b = torch.randn(8, 1, 3, 3, requires_grad=True), torch.randn(8, requires_grad=True)
    before = inductor.decomposed()["depthwise_conv2d"]
    inductor.set_decomposed("depthwise_conv2d", decompose)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(lambda x, w, b: torch.relu(ops.depthwise_conv2d(x, w, b, [1, 1], [1, 1], [1, 1])))

        def step():
            out = compiled(x, w, b)
            return out, torch.autograd.grad(out.square().sum(), [x, w, b])

        with torch._inductor.config.patch(force_disable_caches=True):
            (out, grads), code = run_and_get_code(step)
    finally:
        inductor.set_decomposed("depthwise_conv2d", before)
        torch._dynamo.reset()
    code = "\n".join(code)
    lines = code.splitlines()
    forward = [line for line in lines if "= torch.ops.customops.depthwise_conv2d.default(" in line]
    backward = [line for line in lines if "= torch.ops.customops.depthwise_conv2d_backward.default(" in line]
    assert len(forward) == 1 and len(backward) == 1, code[-3000:]
    assert (", None, " in forward[0]) == decompose, forward
    assert backward[0].rstrip().endswith("[True, True, False])" if decompose else "[True, True, True])"), backward
    ref_in = [t.detach().double().requires_grad_() for t in (x, w, b)]
    ref = torch.relu(torch.nn.functional.conv2d(*ref_in, 1, 1, 1, 8))
    torch.testing.assert_close(out, ref.float())
    for g, r in zip(grads, torch.autograd.grad(ref.square().sum(), ref_in)):
        torch.testing.assert_close(g, r.float())


class _Block(torch.nn.Module):
    """An inverted-residual block's tail: a batch norm's backward makes the depthwise layer's output gradient."""

    def __init__(self):
        super().__init__()
        self.expand, self.bn1 = torch.nn.Conv2d(6, 16, 1), torch.nn.BatchNorm2d(16)
        self.depthwise, self.bn2 = customops.DepthwiseConv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16)
        self.project = torch.nn.Conv2d(16, 4, 1)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.bn1(self.expand(x)))
        return self.project(torch.nn.functional.gelu(self.bn2(self.depthwise(x) + x)))


def _copies_inside_the_ops(prof) -> list:
    """The depthwise op each aten::clone of the profile ran inside, one entry a clone."""
    found = []
    for event in (e for e in prof.events() if e.name == "aten::clone"):
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("customops::depthwise_conv2d"):
            parent = parent.cpu_parent
        if parent is not None:
            found.append(parent.name)
    return found


@pytest.mark.parametrize("channels_last", [True, False], ids=["channels_last", "nchw"])
def test_inductor_lays_the_kept_op_s_tensors_out_as_the_kernels_read_them(channels_last):
    """Inductor chooses the layout of what a fused kernel makes; left free, it made the output gradient NCHW
    beside a channels_last input, and the op copied it on every call. The op's layout constraints ask for the
    input's format: no copy inside the ops, the same values."""
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = _Block().to(memory_format=fmt)
    x = torch.randn(3, 6, 10, 11).to(memory_format=fmt).requires_grad_()
    torch._dynamo.reset()
    compiled = torch.compile(model)
    with torch._inductor.config.patch(force_disable_caches=True):
        compiled(x).square().mean().backward()
        x.grad = None
        model.zero_grad()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = compiled(x)
            out.square().mean().backward()
    torch._dynamo.reset()
    calls = {e.name for e in prof.events() if e.name.startswith("customops::depthwise_conv2d")}
    assert calls == {"customops::depthwise_conv2d", "customops::depthwise_conv2d_backward"}, calls
    assert _copies_inside_the_ops(prof) == []
    reference = _Block().double().to(memory_format=fmt)
    reference.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    # The compiled model updated its running statistics twice; the reference starts from the updated ones, and
    # in training mode uses the batch's: the outputs do not depend on them.
    ref_x = x.detach().double().requires_grad_()
    ref = reference(ref_x)
    ref.square().mean().backward()
    torch.testing.assert_close(out, ref.float(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x.grad, ref_x.grad.float(), rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad.float(), rtol=1e-4, atol=1e-4, msg=name)


# --- on a GPU ---------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("timed", [False, True], ids=["rule", "timed"])
def test_cuda_compiled_layers_run_what_eager_runs(timed, monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", timed)
    customops.backends.clear_timed()
    layers = [(torch.bfloat16, True, (16, 96, 28, 28), 3, 1), (torch.float32, False, (16, 144, 28, 28), 3, 2),
              (torch.bfloat16, True, (8, 16, 7, 7), 3, 1)]
    for dtype, channels_last, shape, taps, stride in layers:
        x = torch.randn(shape, device="cuda", dtype=dtype)
        x = x.contiguous(memory_format=torch.channels_last) if channels_last else x
        x.requires_grad_()
        w = torch.randn(shape[1], 1, taps, taps, device="cuda", dtype=dtype, requires_grad=True)
        b = torch.randn(shape[1], device="cuda", dtype=dtype, requires_grad=True)
        geometry = ([stride] * 2, [taps // 2] * 2, [1, 1])
        torch._dynamo.reset()
        compiled = torch.compile(lambda x, w, b: torch.relu(ops.depthwise_conv2d(x, w, b, *geometry)))

        def step():
            out = compiled(x, w, b)
            return out, torch.autograd.grad(out.float().square().sum(), [x, w, b])

        with torch._inductor.config.patch(force_disable_caches=True):
            (out, grads), code = run_and_get_code(step)
        want = customops.backends.describe_depthwise(x, w, True, stride, taps // 2, 1)
        if timed:
            # Timed when the graph was traced, each pass once, for the op's call without its bias: the compiled
            # step's calls of the op found their choices made (no more entries for the shape in its layout).
            # Inductor may hand the op another layout than the one traced (the op leaves it free to choose), and
            # the op then decides for that layout at run time, under a key of its own.
            record = customops.backends.timed()
            layout = "/cl/" if channels_last else "/nchw/"
            keys = [k for k in record if f"/{shape[0]}x{shape[1]}x{shape[2]}x{shape[3]}/" in k and layout in k]
            assert len(keys) == 3 and not any(k.endswith("/bias") for k in keys), record
            want = {p: next(record[k] for k in keys if f"/{p}/" in k) for p in PASSES}
        code = "\n".join(code)
        assert ("torch.ops.customops.depthwise_conv2d.default(" in code) == (want["forward"] == "customops"), code
        ref_in = [t.detach().double().requires_grad_() for t in (x, w, b)]
        ref = torch.relu(torch.nn.functional.conv2d(*ref_in, stride, taps // 2, 1, shape[1]))
        rtol, atol = OP.tolerances[dtype]
        torch.testing.assert_close(out, ref.to(dtype), rtol=rtol, atol=atol)
        for g, r in zip(grads, torch.autograd.grad(ref.square().sum(), ref_in)):
            # Sums over the batch and the plane: the tolerance scales with the gradient's size.
            torch.testing.assert_close(g.double(), r, rtol=rtol, atol=atol * float(r.abs().max()))
    customops.backends.clear_timed()
    torch._dynamo.reset()
