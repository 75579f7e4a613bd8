"""ONNX export of every customops forward op (customops.onnx), table-driven over op_db.OP_DB.

Each exported model is checked with onnx.checker, must be standard ONNX (default domain only, opset >= 18,
no local functions), must contain the ONNX ops the translation promises (each OpInfo's onnx_nodes: Conv with
the sample's group, strides, pads and dilations; Resize with the sample's coordinate mode; ...) on the path to
each output, and must match eager PyTorch in ONNX Runtime within 1e-5 (float32). To keep CI time down, one
export holds all of an op's samples (one output per sample; every check still runs per sample and names it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import deque

import pytest
import torch
from torch import nn

onnx = pytest.importorskip("onnx", reason="needs the onnx extra: pip install 'customops[onnx]'")
pytest.importorskip("onnxscript", reason="needs the onnx extra: pip install 'customops[onnx]'")
ort = pytest.importorskip("onnxruntime", reason="needs the onnx extra: pip install 'customops[onnx]'")

import customops  # noqa: E402
from conftest import requires_cuda  # noqa: E402
from op_db import OP_DB, OpInfo, SideBySide  # noqa: E402

pytestmark = pytest.mark.torch_dependent

RTOL = ATOL = 1e-5  # float32, ONNX Runtime against eager
MODEL_TOL = 1e-4  # whole networks
COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric")
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", marks=requires_cuda, id="cuda")]


# --- export, structure, run --------------------------------------------------------------------------------


def export(model: nn.Module, args: tuple, **kwargs):
    return torch.onnx.export(model, args, dynamo=True, verbose=False, **kwargs)


def check_standard(proto) -> None:
    """Valid, default-domain ONNX at opset >= 18, with no customops (or any other) domain left."""
    onnx.checker.check_model(proto, full_check=True)
    opsets = {o.domain: o.version for o in proto.opset_import}
    assert opsets.get("", opsets.get("ai.onnx", 0)) >= customops.onnx.MIN_OPSET, opsets
    foreign = sorted({f"{n.domain}::{n.op_type}" for n in proto.graph.node if n.domain not in ("", "ai.onnx")})
    assert not foreign, f"nodes outside the default ONNX domain: {foreign}"
    assert not proto.functions, f"model-local functions: {[f.name for f in proto.functions]}"


def attributes(node) -> dict:
    values = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        values[a.name] = v.decode() if isinstance(v, bytes) else list(v) if isinstance(v, (list, tuple)) else v
    return values


def ancestors(graph, output_name: str) -> list:
    """The nodes the value ``output_name`` depends on."""
    producer = {out: n for n in graph.node for out in n.output}
    seen, nodes, queue = set(), [], deque([output_name])
    while queue:
        node = producer.get(queue.popleft())
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        queue.extend(node.input)
    return nodes


def assert_contains(nodes, op_type: str, where: str, **attrs) -> None:
    """One of ``nodes`` is ``op_type`` with (at least) ``attrs``."""
    found = [attributes(n) for n in nodes if n.op_type == op_type]
    assert found, f"{where}: no {op_type} node (has {sorted({n.op_type for n in nodes})})"
    assert any(all(a.get(k) == v for k, v in attrs.items()) for a in found), \
        f"{where}: no {op_type} with {attrs}; found {found}"


def run_ort(proto, inputs: list) -> list:
    """ONNX Runtime on ``inputs``: CUDA's provider for CUDA inputs where this onnxruntime has it, else CPU's on
    the host copies."""
    cuda = any(t.is_cuda for t in inputs) and "CUDAExecutionProvider" in ort.get_available_providers()
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CUDAExecutionProvider" if cuda else "CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    assert len(names) == len(inputs), (names, len(inputs))
    return session.run(None, {n: t.detach().cpu().contiguous().numpy() for n, t in zip(names, inputs)})


def assert_matches(got, want: torch.Tensor, what: str, tol: float = ATOL) -> None:
    torch.testing.assert_close(torch.from_numpy(got), want.detach().cpu(), rtol=tol, atol=tol,
                               msg=lambda m: f"{what}: {m}")


# --- what each translation must contain ------------------------------------------------------------------


@pytest.mark.every_op
def test_every_op_has_expectations_and_a_translation():
    assert all(callable(op.onnx_nodes) for op in OP_DB)
    table = customops.onnx.translation_table()
    # Each overload the op table calls (op_db's SampleInput.overload), its .default among them.
    assert set(table) == {op.overload_of(s) for op in OP_DB for s in op.sample_inputs("cpu", torch.float32, False)}


# --- every sample of every op -------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_samples_export_and_match(op: OpInfo, device: str):
    samples = list(op.sample_inputs(device, torch.float32, False))
    built = [op.module(s) for s in samples]
    inputs = [a for _, args in built for a in args]
    model = SideBySide(built).eval()
    proto = export(model, tuple(inputs)).model_proto
    check_standard(proto)
    assert len(proto.graph.output) == len(samples)
    with torch.no_grad():
        expected = model(*inputs)
    results = run_ort(proto, inputs)
    for sample, output, got, want in zip(samples, proto.graph.output, results, expected):
        where = f"{op.name}[{sample.name}]"
        nodes = ancestors(proto.graph, output.name)
        for op_type, attrs in op.onnx_nodes(sample):
            assert_contains(nodes, op_type, where, **attrs)
        assert_matches(got, want, where)


# --- dynamic batch --------------------------------------------------------------------------------------------


def _with_batch(t: torch.Tensor, n: int) -> torch.Tensor:
    return torch.randn(n, *t.shape[1:], device=t.device, dtype=t.dtype)


def _check_dynamic_batch(model: nn.Module, args: tuple, batches=(1, 5)) -> None:
    batch = torch.export.Dim("batch")
    proto = export(model, args, dynamic_shapes=tuple({0: batch} for _ in args)).model_proto
    check_standard(proto)
    for graph_input in proto.graph.input:
        assert graph_input.type.tensor_type.shape.dim[0].dim_param, f"{graph_input.name}: batch is not dynamic"
    for n in batches:
        inputs = [_with_batch(a, n) for a in args]
        with torch.no_grad():
            expected = model(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        for i, (got, want) in enumerate(zip(run_ort(proto, inputs), expected)):
            assert got.shape[0] == n
            assert_matches(got, want, f"batch {n}, output {i}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_dynamic_batch(op: OpInfo, device: str):
    sample = next(iter(op.dynamic_samples(device, torch.float32)))
    model, args = op.module(sample)
    _check_dynamic_batch(model.eval(), tuple(args))


class _EveryMode(nn.Module):
    def __init__(self, size) -> None:
        super().__init__()
        self.ups = nn.ModuleList(customops.UpsampleBilinear2d(size=size, coordinate_mode=m) for m in COORDINATE_MODES)

    def forward(self, x):
        return tuple(up(x) for up in self.ups)


@pytest.mark.parametrize("device", DEVICES)
def test_upsample_every_coordinate_mode_dynamic_batch(device):
    for size in ((13, 7), (1, 1)):  # size 1 is where half_pixel and pytorch_half_pixel part
        _check_dynamic_batch(_EveryMode(size).eval(), (torch.randn(3, 2, 6, 5, device=device),))


@pytest.mark.parametrize("device", DEVICES)
def test_im2col_dynamic_image_size(device):
    # Window indices computed at run time (Range) instead of constants.
    model = customops.Im2col(3, dilation=(1, 2), padding=(1, 0), stride=(2, 1)).eval()
    x = torch.randn(2, 3, 9, 11, device=device)
    dims = {0: torch.export.Dim("batch"), 2: torch.export.Dim("h", min=6), 3: torch.export.Dim("w", min=6)}
    proto = export(model, (x,), dynamic_shapes=(dims,)).model_proto
    check_standard(proto)
    assert_contains(list(proto.graph.node), "Range", "im2col with a dynamic image")
    for shape in ((2, 3, 9, 11), (1, 3, 12, 7)):
        x = torch.randn(shape, device=device)
        assert_matches(run_ort(proto, [x])[0], model(x), f"image {shape}")


# --- the exporter finds the translations by itself -------------------------------------------------------------


def test_plain_export_after_import_customops(tmp_path):
    # A fresh interpreter: customops has not imported onnxscript, so the translations are registered by the
    # hook when torch.onnx.export loads the registry (customops/onnx/_hook.py).
    code = textwrap.dedent("""
        import sys, torch, customops
        assert "onnxscript" not in sys.modules and "onnx" not in sys.modules, "import customops imported onnx"
        model = torch.nn.Sequential(customops.DepthwiseConv2d(3, 6, 3, padding=1), customops.QuickGELU(),
                                    customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode="asymmetric"))
        program = torch.onnx.export(model.eval(), (torch.randn(1, 3, 8, 8),), dynamo=True)
        print(sorted({(n.domain, n.op_type) for n in program.model_proto.graph.node}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "('', 'Conv'), ('', 'Mul'), ('', 'Resize'), ('', 'Sigmoid')" in out.stdout.splitlines()[-1]


@pytest.mark.every_op
def test_exporter_registry_has_every_op():
    # The one private torch API in these tests, on purpose: it is what torch.onnx.export(dynamo=True) builds
    # its registry with. If this fails while customops.onnx.is_registered() passes, torch no longer reads
    # onnxscript's torch_lib registry and customops.onnx._registration must register elsewhere.
    from torch.onnx._internal.exporter import _registration

    # Built first: it imports onnxscript's torch_lib registry, which registers customops' translations (before
    # that import is_registered() is False, whichever tests ran before this one).
    registry = _registration.ONNXRegistry.from_torchlib()
    assert customops.onnx.is_registered()
    missing = [op.name for op in OP_DB if not registry.is_registered(op.overload)]
    assert not missing, f"torch's ONNX exporter does not see the translations of {missing}"


def test_register_is_idempotent(recwarn):
    customops.onnx.register()
    customops.onnx.register()
    assert not [w for w in recwarn if "already registered" in str(w.message)]


def test_custom_translation_table():
    program = export(customops.QuickGELU().eval(), (torch.randn(4),),
                     custom_translation_table=customops.onnx.translation_table())
    assert [n.op_type for n in program.model_proto.graph.node] == ["Mul", "Sigmoid", "Mul"]


def test_without_the_onnx_extra(tmp_path):
    code = textwrap.dedent("""
        import sys
        class Missing:  # as if onnx, onnxscript and onnxruntime were not installed
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("onnx", "onnxscript", "onnxruntime", "onnx_ir"):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, Missing())
        import torch, customops
        print(customops.quick_gelu(torch.zeros(1)).item())
        for call in (customops.onnx.translation_table,
                     lambda: customops.deploy.check(customops.QuickGELU(), (torch.ones(2),))):
            try:
                call()
            except ImportError as e:
                print("ImportError:", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "0.0"
    assert lines[1].startswith("ImportError: customops.onnx needs onnx") and "pip install 'customops[onnx]'" in lines[1]
    assert lines[2].startswith("ImportError: customops.deploy needs onnx") and "customops[onnx]" in lines[2]


# --- whole networks -------------------------------------------------------------------------------------------


def _randomise_batchnorm(model: nn.Module) -> nn.Module:
    """weights=None leaves BatchNorm as the identity and mobilenet_v2's output near 1e-9; statistics of an
    ordinary size make the comparison mean something."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                for t, lo, hi in ((m.running_mean, -0.2, 0.2), (m.running_var, 0.5, 1.5), (m.weight, 0.5, 1.5),
                                  (m.bias, -0.2, 0.2)):
                    t.copy_(torch.empty(t.shape).uniform_(lo, hi, generator=g))
    return model


def _check_network(model: nn.Module, x: torch.Tensor) -> list:
    proto = export(model, (x,)).model_proto
    check_standard(proto)
    with torch.no_grad():
        want = model(x)
    assert want.abs().max() > 1e-2, "the output is too small for the comparison to mean anything"
    assert_matches(run_ort(proto, [x])[0], want, type(model).__name__, MODEL_TOL)
    return list(proto.graph.node)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["mobilenet_v2", "convnext_tiny"])
def test_torchvision_model(name, device):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = _randomise_batchnorm(getattr(torchvision.models, name)(weights=None)).eval()
    model, report = customops.convert(model, conv2d=True, return_report=True)
    assert report.swapped and not report.skipped, report
    nodes = _check_network(model.to(device), torch.randn(1, 3, 64, 64, device=device))
    assert any(n.op_type == "Conv" and attributes(n).get("group", 1) > 1 for n in nodes)  # the depthwise layers


class Detector(nn.Module):
    """A conv backbone, an FPN-like top-down path that upsamples with nn.Upsample (converted to
    customops.UpsampleBilinear2d in the mode under test) and QuickGELU activations."""

    def __init__(self) -> None:
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cin, 3, 2, 1, groups=cin), nn.Conv2d(cin, cout, 1),
                                 customops.QuickGELU())

        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), customops.QuickGELU())
        self.c3, self.c4, self.c5 = block(8, 16), block(16, 24), block(24, 32)
        self.lateral = nn.ModuleList(nn.Conv2d(c, 16, 1) for c in (16, 24, 32))
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.head = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), customops.QuickGELU(), nn.Conv2d(16, 6, 1))

    def forward(self, x):
        c3 = self.c3(self.stem(x))
        c4 = self.c4(c3)
        c5 = self.c5(c4)
        p5 = self.lateral[2](c5)
        p4 = self.lateral[1](c4) + self.up(p5)
        p3 = self.lateral[0](c3) + self.up(p4)
        return self.head(p3), self.head(p4), self.head(p5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", COORDINATE_MODES)
def test_detector(mode, device):
    torch.manual_seed(0)
    model = customops.convert(Detector().eval(), conv2d=True, coordinate_mode=mode).to(device)
    assert all(type(m) is not nn.Upsample for m in model.modules())
    x = torch.randn(2, 3, 64, 64, device=device)
    batch = torch.export.Dim("batch")
    proto = export(model, (x,), dynamic_shapes=({0: batch},)).model_proto
    check_standard(proto)
    resizes = [attributes(n) for n in proto.graph.node if n.op_type == "Resize"]
    assert len(resizes) == 2 and all(r["coordinate_transformation_mode"] == mode for r in resizes), resizes
    for n in (2, 3):
        x = torch.randn(n, 3, 64, 64, device=device)
        with torch.no_grad():
            expected = model(x)
        for i, (got, want) in enumerate(zip(run_ort(proto, [x]), expected)):
            assert_matches(got, want, f"{mode}, batch {n}, output {i}", MODEL_TOL)
