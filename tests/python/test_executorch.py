"""ExecuTorch: every op's samples exported, lowered (XNNPACK delegate on and off), made a program and run by
ExecuTorch's runtime, against eager PyTorch, by each route an op has: its core-ATen decomposition, and customops'
own kernel (libcustomops_executorch.so) for the ops that have one (customops.executorch)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest
import torch

import customops
import customops.deploy
from conftest import full_or_sample
from op_db import OP_DB, OpInfo

pytest.importorskip("executorch.exir", reason="needs executorch (requirements/torch-2.15.txt)")
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from customops.deploy.pte import execute  # noqa: E402

pytestmark = pytest.mark.torch_dependent

# A compact sample of each op (a conversion takes seconds): its first sample with data (ExecuTorch's planner
# takes no empty tensors), and the first of each other overload; test_the_decompositions_compute_the_ops checks
# every sample.
SAMPLES_PER_OP = 1


def _samples(op: OpInfo):
    samples = [s for s in op.sample_inputs("cpu", torch.float32, False) if all(t.numel() > 0 for t in s.tensors())]
    others = {}
    for s in samples:
        # A program's inputs are contiguous (or channels_last 4-D) tensors.
        if s.overload != "default" and all(t.is_contiguous() for t in s.tensors()):
            others.setdefault(s.overload, s)
    return samples[:SAMPLES_PER_OP] + list(others.values())


def _takes_kernel(op: OpInfo, sample) -> bool:
    # customops' ExecuTorch kernels are the default overloads' (their out variants); other overloads decompose.
    return sample.overload == "default" and customops.executorch.uses_kernel(op.name, *sample.args, **sample.kwargs)


def _run(program, inputs):
    return execute(program.buffer, inputs)


@pytest.mark.every_op
def test_every_op_has_a_core_aten_decomposition():
    table = customops.executorch.decompositions(every=True)
    called = {op.overload_of(s) for op in OP_DB for s in op.sample_inputs("cpu", torch.float32, False)}
    assert called <= set(table), {o.name() for o in called} - {o.name() for o in table}


def _as_in_a_graph(op: OpInfo, kwargs: dict) -> dict:
    """The arguments as an exported graph passes them: an int given for an int[2] is a pair."""
    lists = {a.name for a in op.overload._schema.arguments if str(a.type).startswith(("List[int]", "List[SymInt]"))}
    return {k: [v, v] if k in lists and isinstance(v, int) else list(v) if k in lists else v
            for k, v in kwargs.items()}


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_the_decompositions_compute_the_ops(op: OpInfo):
    table = customops.executorch.decompositions(every=True)
    for dtype in (torch.float32, torch.float64):
        for sample in op.sample_inputs("cpu", dtype, False):
            want = op.overload_of(sample)(*sample.args, **sample.kwargs)
            got = table[op.overload_of(sample)](*sample.args, **_as_in_a_graph(op, sample.kwargs))
            rtol, atol = op.tolerances[dtype]
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"{sample.name} {dtype}: {m}")


def test_importing_executorch_registers_the_ops():
    import executorch.exir.program._program  # noqa: F401

    assert customops.executorch.is_registered(), customops.executorch.error


def _routes(op: OpInfo):
    return ["decomposition", "kernel"] if op.name in customops.executorch.kernel_ops() else ["decomposition"]


ROUTED = [(op, route) for op in OP_DB for route in _routes(op)]
needs_kernels = pytest.mark.skipif(customops.executorch.kernel_library() is None,
                                   reason="libcustomops_executorch.so not built (no executorch when customops was)")


def _lower_and_run(op: OpInfo, route: str, delegate: bool, sample, dtype=torch.float32):
    module, inputs = op.module(sample)
    with torch.no_grad():
        want = module(*inputs)
    with customops.executorch.use_route(op.name, route):
        takes_kernel = _takes_kernel(op, sample)
        # Calls XNNPACK runs as a node of its own leave no customops op, whatever the route.
        takes_kernel &= not (delegate and customops.executorch.xnnpack_takes(op.name, *sample.args, **sample.kwargs))
        exported = torch.export.export(module, tuple(inputs))
        program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()] if delegate else None)
        program = program.to_executorch()
    ops = [str(n.target) for n in program.exported_program().graph.nodes if n.op == "call_function"]
    customops_ops = [o for o in ops if o.startswith("customops.")]
    # The route taken: the op's out variant, run by customops' kernel, or no customops op at all.
    assert customops_ops == ([f"customops.{op.name}.out"] if takes_kernel else []), ops
    (got,) = _run(program, inputs)
    scale = max(1.0, float(want.abs().max()))
    assert got.shape == want.shape and got.dtype == want.dtype, sample.name
    return float((got.double() - want.double()).abs().max()) / scale


@pytest.mark.parametrize("delegate", [True, False], ids=["xnnpack", "portable"])
@pytest.mark.parametrize("op, route", [pytest.param(o, r, marks=[needs_kernels] if r == "kernel" else [])
                                       for o, r in ROUTED], ids=[f"{o}-{r}" for o, r in ROUTED])
def test_programs_run_what_eager_runs(op: OpInfo, route, delegate):
    if route == "kernel":
        customops.executorch.load_kernels()
    for sample in _samples(op):
        error = _lower_and_run(op, route, delegate, sample)
        assert error <= 1e-5, f"{sample.name}: {error}"


KERNEL_OPS = [op for op in OP_DB if op.name in customops.executorch.kernel_ops()]


@needs_kernels
@pytest.mark.parametrize("op", KERNEL_OPS, ids=str)
def test_customops_kernels_compute_every_sample(op: OpInfo):
    # Every sample with data (the planner takes no empty tensors) that takes the kernel, in each dtype: the kernel
    # and libtorch's run the same maths (kernels/core/), so they agree to rounding.
    customops.executorch.load_kernels()
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        with customops.executorch.use_route(op.name, "kernel"):
            samples = [s for s in op.sample_inputs("cpu", dtype, False) if all(t.numel() > 0 for t in s.tensors())
                       and _takes_kernel(op, s)]
        # Every kernel takes float32; the other dtypes where it takes them (not float64 for the pointwise ops).
        assert samples or dtype != torch.float32, f"no {dtype} sample takes customops' kernel"
        for sample in samples[:3 if dtype == torch.float32 else 1]:
            error = _lower_and_run(op, "kernel", False, sample, dtype)
            tolerance = 1e-5 if dtype in (torch.float32, torch.float64) else 1e-2
            assert error <= tolerance, f"{sample.name} {dtype}: {error}"


@pytest.mark.every_op
def test_routes_default_to_the_kernels_that_were_built():
    routes = customops.executorch.routes()
    overloads = {f"{op.name}.{s.overload}" for op in OP_DB for s in op.sample_inputs("cpu", torch.float32, False)
                 if s.overload != "default"}
    assert set(routes) == {op.name for op in OP_DB} | overloads
    built = customops.executorch.kernel_library() is not None
    defaults = {op: route for f in customops.executorch.families() for op, route in getattr(f, "KERNELS", {}).items()}
    for op, route in routes.items():
        assert route == (defaults.get(op, "decomposition") if built else "decomposition"), op
    assert defaults["col2im"] == "kernel" and defaults["upsample_bilinear2d"] == "decomposition"
    assert {"trilinear_interpolation", "causal_conv1d", "col2im", "upsample_bilinear2d"} <= \
        customops.executorch.kernel_ops()


@needs_kernels
def test_a_kernel_routed_op_takes_the_kernel_only_where_the_decomposition_is_not_core_aten():
    # The resize on the kernel route: PyTorch's conventions become aten.upsample_bilinear2d (XNNPACK runs it),
    # asymmetric the kernel.
    x = torch.randn(1, 2, 5, 7)
    for mode, kernel in (("half_pixel", False), ("align_corners", False), ("asymmetric", True)):
        module = customops.UpsampleBilinear2d(size=(9, 11), coordinate_mode=mode).eval()
        with customops.executorch.use_route("upsample_bilinear2d", "kernel"):
            assert customops.executorch.uses_kernel("upsample_bilinear2d", x, [9, 11], mode) == kernel, mode
            program = to_edge_transform_and_lower(torch.export.export(module, (x,))).to_executorch()
        ops = {str(n.target) for n in program.exported_program().graph.nodes if n.op == "call_function"}
        assert ("customops.upsample_bilinear2d.out" in ops) == kernel, (mode, ops)
        customops.executorch.load_kernels()
        (got,) = _run(program, [x])
        torch.testing.assert_close(got, module(x), rtol=1e-6, atol=1e-6)
    assert not customops.executorch.uses_kernel("upsample_bilinear2d", x, [9, 11], "asymmetric")  # the default


@needs_kernels
@pytest.mark.parametrize("channels, multiplier, filter_size, layout, kernel", [
    (16, 1, 7, torch.contiguous_format, True),  # blocked over channels
    (5, 1, 9, torch.contiguous_format, True),  # too few channels to block: the row kernel
    (16, 1, 5, torch.contiguous_format, False),  # XNNPACK's one-pass filters stay delegated
    (16, 2, 7, torch.contiguous_format, True),  # a channel multiplier: the row kernel
    (16, 2, 3, torch.contiguous_format, False),
    (16, 1, 7, torch.channels_last, False),
], ids=["7x7", "5_channels", "5x5", "multiplier", "multiplier_3x3", "channels_last"])
def test_depthwise_takes_the_kernel_by_default_only_for_wide_filters(channels, multiplier, filter_size, layout,
                                                                     kernel):
    module = customops.DepthwiseConv2d(channels, channels * multiplier, filter_size, padding=filter_size // 2).eval()
    x = torch.randn(2, channels, 11, 13).contiguous(memory_format=layout)
    assert customops.executorch.uses_kernel("depthwise_conv2d", x, module.weight, module.bias, module.stride,
                                            module.padding, module.dilation) == kernel
    program = to_edge_transform_and_lower(torch.export.export(module, (x,)),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    ops = {str(n.target) for n in program.exported_program().graph.nodes if n.op == "call_function"}
    assert ("customops.depthwise_conv2d.out" in ops) == kernel, ops
    customops.executorch.load_kernels()
    (got,) = _run(program, [x])
    torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)


@needs_kernels
def test_the_depthwise_benchmark_times_both_programs(monkeypatch, tmp_path):
    from customops.benchmark import executorch as bench

    monkeypatch.setattr(bench, "DEPTHWISE_SHAPES", ((1, 8, 9, 10, 7, 1, 1), (1, 8, 9, 10, 3, 2, 1),
                                                    (1, 3, 9, 10, 7, 1, 2)))
    out = tmp_path / "depthwise.md"
    assert bench.main(["--depthwise", "--markdown", str(out)]) == 0
    rows = [line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| 1x")]
    assert [(r[1], r[3], r[4]) for r in rows] == [("7x7", "1", "kernel"), ("3x3", "1", "decomposition"),
                                                  ("7x7", "2", "kernel")]
    assert all(float(r[5]) > 0 and float(r[6]) > 0 for r in rows)
    # The measurement set the width threshold aside and put it back.
    from customops.executorch import conv

    assert conv.KERNEL_WHEN["depthwise_conv2d"] is conv.depthwise_uses_kernel


class _ResizeBetweenConvs(torch.nn.Module):
    """An asymmetric resize of the input itself (NCHW from the program's input), then one between convolutions
    (whose outputs XNNPACK keeps NHWC)."""

    def __init__(self, layout_probe: bool = False):
        super().__init__()
        self.first = customops.UpsampleBilinear2d(size=(13, 9), coordinate_mode="asymmetric")
        self.conv = torch.nn.Conv2d(3, 5, 3, padding=1)
        self.second = customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode="asymmetric")
        self.out = torch.nn.Conv2d(5, 4, 1)

    def forward(self, x):
        return self.out(self.second(torch.relu(self.conv(self.first(x)))))


def _call_targets(program) -> set:
    return {str(n.target) for n in program.exported_program().graph.nodes if n.op == "call_function"}


@pytest.mark.parametrize("route", ["decomposition", "kernel"])
@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last], ids=["nchw", "channels_last"])
def test_xnnpack_runs_asymmetric_resizes_as_its_own_legacy_mode_resize(route, layout):
    if route == "kernel" and customops.executorch.kernel_library() is None:
        pytest.skip("needs libcustomops_executorch.so")
    torch.manual_seed(0)
    module = _ResizeBetweenConvs().eval()
    x = torch.randn(2, 3, 6, 7).contiguous(memory_format=layout)
    with customops.executorch.use_route("upsample_bilinear2d", route):
        program = to_edge_transform_and_lower(torch.export.export(module, (x,)),
                                              partitioner=[XnnpackPartitioner()]).to_executorch()
    # One delegate call: no padding, crop or resize left outside XNNPACK.
    assert _call_targets(program) <= {"executorch_call_delegate", "<built-in function getitem>"}, \
        _call_targets(program)
    (got,) = _run(program, [x])
    want = module(x)
    assert (got - want).abs().max() <= 1e-5 * (want.max() - want.min())


def test_xnnpack_leaves_the_resizes_it_does_not_take_to_their_route():
    # float64 (XNNPACK's resize is float32) and half_pixel (decomposed into aten.upsample_bilinear2d.vec first).
    from customops.executorch import upsample

    x = torch.randn(1, 2, 5, 7)
    assert upsample.xnnpack_takes(x, [9, 11], "asymmetric")
    assert not upsample.xnnpack_takes(x.double(), [9, 11], "asymmetric")
    assert not upsample.xnnpack_takes(x, [9, 11], "half_pixel")
    assert not upsample.xnnpack_takes(x[0], [9, 11], "asymmetric")
    module = customops.UpsampleBilinear2d(size=(9, 11), coordinate_mode="asymmetric").eval()
    program = to_edge_transform_and_lower(torch.export.export(module.double(), (x.double(),)),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    targets = _call_targets(program)
    assert "executorch_call_delegate" not in targets and any("upsample_bilinear2d" in t for t in targets), targets
    (got,) = _run(program, [x.double()])
    # (ExecuTorch's portable resize computes its coordinates in float32, whatever the dtype.)
    torch.testing.assert_close(got, module(x.double()), rtol=1e-5, atol=1e-5)


def test_set_route_refuses_what_does_not_exist_and_restores_the_default():
    with pytest.raises(ValueError, match="route must be one of"):
        customops.executorch.set_route("col2im", "xnnpack")
    with pytest.raises(ValueError, match="no op 'nope'"):
        customops.executorch.set_route("nope", "kernel")
    with pytest.raises(ValueError, match="no ExecuTorch kernel of conv2d"):
        customops.executorch.set_route("conv2d", "kernel")
    default = customops.executorch.routes()["col2im"]
    with customops.executorch.use_route("col2im", "decomposition"):
        assert customops.executorch.routes()["col2im"] == "decomposition"
        table = customops.executorch.decompositions()
        assert torch.ops.customops.col2im.default in table
    assert customops.executorch.routes()["col2im"] == default


def test_a_fresh_process_that_imports_executorch_first(tmp_path):
    # ExecuTorch imported before customops: the registration happens at `import customops`.
    code = ("import executorch.exir, torch, customops\n"
            "from executorch.exir import to_edge_transform_and_lower\n"
            "m = customops.DepthwiseConv2d(4, 4, 3, padding=1).eval()\n"
            "x = torch.randn(1, 4, 8, 8)\n"
            "to_edge_transform_and_lower(torch.export.export(m, (x,))).to_executorch()\n"
            "assert customops.executorch.is_registered()\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr[-3000:]


class Net(torch.nn.Module):
    """A depthwise layer, QuickGELU and an asymmetric resize: three ops, three decompositions."""

    def __init__(self) -> None:
        super().__init__()
        self.dw = customops.DepthwiseConv2d(8, 8, 3, padding=1)
        self.up = customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode="asymmetric")

    def forward(self, x):
        return self.up(customops.quick_gelu(self.dw(x)))


def _net():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, 8, 12, 12),)


def test_parity_report_runs_both_lowerings_and_keeps_the_model(tmp_path):
    model, args = _net()
    path = tmp_path / "net.pte"
    report = customops.deploy.check(model, args, runtime="executorch", save_pte=str(path))
    assert report.ok, report
    assert [p.op for p in report.ops] == ["customops.depthwise_conv2d", "customops.quick_gelu",
                                          "customops.upsample_bilinear2d"]
    assert all(p.max_abs_diff < 1e-5 for p in report.ops)
    assert set(report.pte_operators) == {"xnnpack", "portable"}
    assert report.pte_operators["xnnpack"].get("xnnpack", 0) >= 1 and "xnnpack" not in report.pte_operators["portable"]
    assert "convolution" in report.pte_operators["portable"] and "ExecuTorch kernels (xnnpack)" in str(report)
    # The kept program is the model a user deploys: its own output only, not the ops' values.
    outputs = execute(path.read_bytes(), args)
    assert len(outputs) == 1
    torch.testing.assert_close(outputs[0], model(*args), rtol=1e-5, atol=1e-5)
    # On request, the checked program instead: the output, then the three ops' results.
    customops.deploy.check(model, args, runtime="executorch", save_pte=str(path), save_instrumented=True)
    assert len(execute(path.read_bytes(), args)) == 4


@needs_kernels
def test_the_report_names_each_ops_route():
    torch.manual_seed(0)
    model = torch.nn.Sequential(customops.CausalConv1d(8, 4), customops.QuickGELU()).eval()
    report = customops.deploy.check(model, (torch.randn(2, 8, 16),), runtime="executorch")
    assert report.ok, report
    assert {p.op: p.onnx for p in report.ops} == {"customops.causal_conv1d": "customops kernel (causal_conv1d.out)",
                                                  "customops.quick_gelu": "customops kernel (quick_gelu.out)"}
    with customops.executorch.use_route("quick_gelu", "decomposition"):
        report = customops.deploy.check(model, (torch.randn(2, 8, 16),), runtime="executorch")
    assert {p.op: p.onnx for p in report.ops}["customops.quick_gelu"] == "decomposed (core ATen)"
    for lowering in ("xnnpack", "portable"):
        assert report.pte_operators[lowering].get("customops::causal_conv1d") == 1, report.pte_operators
    assert "route" in str(report) and "customops::causal_conv1d" in str(report)
    # Per call: on the kernel route, the resize takes the kernel where aten.upsample_bilinear2d has no convention.
    resizes = torch.nn.Sequential(customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode="align_corners"),
                                  customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode="asymmetric"))
    with customops.executorch.use_route("upsample_bilinear2d", "kernel"):
        report = customops.deploy.check(resizes, (torch.randn(1, 2, 4, 4),), runtime="executorch")
    assert report.ok, report
    assert [p.onnx for p in report.ops] == [
        "decomposed (core ATen)",
        "XNNPACK's own node with its delegate, else customops kernel (upsample_bilinear2d.out)"]


def test_a_wrong_decomposition_is_a_mismatch(monkeypatch):
    # As if the resize's decomposition took the wrong convention: its row and the output show it.
    from customops.executorch import upsample

    monkeypatch.setitem(upsample._ALIGN_CORNERS, "asymmetric", False)
    model, args = _net()
    report = customops.deploy.check(model, args, runtime="executorch")
    assert not report.ok
    mismatched = {f.where for f in report.mismatches}
    assert report.ops[2].node in mismatched and "model" in mismatched
    assert report.ops[0].max_abs_diff < 1e-5


def test_dynamic_shapes_are_refused_not_ignored():
    model, args = _net()
    with pytest.raises(ValueError, match="leave dynamic_shapes out"):
        customops.deploy.check(model, args, runtime="executorch", dynamic_shapes=({0: torch.export.Dim("n")},))


def test_cli_saves_the_program(tmp_path):
    (tmp_path / "mynet.py").write_text(
        "import torch, customops\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    return customops.DepthwiseConv2d(4, 4, 3, padding=1), torch.randn(1, 4, 8, 8)\n")
    out = subprocess.run([sys.executable, "-m", "customops.deploy.check", "mynet:build", "--runtime", "executorch",
                          "--save", "m.pte"], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path])))
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "ExecuTorch" in out.stdout and "parity: OK" in out.stdout and "saved m.pte" in out.stdout
    assert (tmp_path / "m.pte").stat().st_size > 0


# --- the example networks ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _example_networks():
    """The example's (name, network, plain twin, input)s, made once (the segmenter trains for a few seconds)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "deploy"))
    try:
        import to_executorch
    finally:
        sys.path.pop(0)
    return list(to_executorch.networks())


@pytest.mark.parametrize("index", range(3), ids=["segmenter-asymmetric", "segmenter-align_corners", "mobilenet_v2"])
def test_example_networks(index):
    # Both lowerings (XNNPACK and the portable kernels alone), within 1e-5 of eager PyTorch relative to the
    # output's range (test_example_script lowers the plain twins the example times them against).
    pytest.importorskip("torchvision")
    name, model, plain, args = _example_networks()[index]
    report = customops.deploy.check(model, args, runtime="executorch", atol=float("inf"))
    with torch.no_grad():
        expected = model(*args)
    assert report.max_abs_diff <= 1e-5 * max(1.0, float(expected.max() - expected.min())), report
    assert report.pte_operators["xnnpack"].get("xnnpack", 0) >= 1, report
    assert not any(isinstance(m, customops.DepthwiseConv2d) for m in plain.modules()), name


def test_example_script(tmp_path):
    # The compact sample: the two networks whose programs run customops' own kernels (test_example_networks lowers
    # the first three); the whole table under CUSTOMOPS_FULL_TESTS=1.
    indices = full_or_sample([0, 1, 2, 3, 4], [3, 4])
    out = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "deploy",
                                                       "to_executorch.py"), "--rounds", "2", "--calls", "1",
                          "--networks", ",".join(map(str, indices)), "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)), timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    table = [line for line in out.stdout.splitlines()
             if line.startswith("| ") and not line.startswith(("| network", "| ---"))]
    assert len(table) == len(indices) and all(float(line.split("|")[5]) > 0 for line in table), out.stdout
    assert sorted(p.name for p in tmp_path.glob("*.pte")) == [f"network{i}.pte" for i in indices]
    # The ConvNeXt-style network's 7x7 depthwise layers run customops' kernel, so does the MLP's silu_mul.
    assert "customops kernel (depthwise_conv2d.out)" in out.stderr and "customops kernel (silu_mul.out)" in out.stderr
