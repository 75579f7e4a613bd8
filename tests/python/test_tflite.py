"""TF-Lite: every op's samples and the example networks converted to .tflite and run by the LiteRT interpreter
with each of its kernel options (XNNPACK, builtin, reference), against eager PyTorch, through both converters:

- onnx2tf (customops.deploy.check(..., runtime="tflite")), in the TF-Lite environment
  (python -m customops.deploy.tflite_env; CUSTOMOPS_TFLITE_PYTHON names its Python);
- litert-torch (converter="litert-torch"), where this torch is in its range (2.4-2.14) and it is installed.

Each converted model's operators are checked too: one RESIZE_BILINEAR with the coordinate mode's flags per
resize, DEPTHWISE_CONV_2D for depthwise layers, nothing outside TF-Lite's builtins. To keep CI time down, one
conversion holds all of an op's samples (one output per sample), as in test_onnx.py. What TF-Lite cannot hold
(empty tensors, the ops of no TF-Lite form, unbatched images through onnx2tf: OpInfo's converts_to_tflite and
takes_image) must be reported as ``unsupported``.

The scripts set CUSTOMOPS_REQUIRE_TFLITE_TEST / CUSTOMOPS_REQUIRE_LITERT_TEST where they installed the
converter: these tests then fail instead of skipping when it is missing.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import customops
from conftest import FULL_TESTS  # noqa: E402
from op_db import OP_DB, OpInfo, SideBySide  # noqa: E402

pytest.importorskip("onnx", reason="needs the onnx extra: pip install 'customops[onnx]'")

from customops.deploy import check, tflite  # noqa: E402
from customops.deploy import tflite_env  # noqa: E402

pytestmark = pytest.mark.torch_dependent

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATOL = 1e-5  # float32, every sample
NET_RTOL = 1e-5  # networks: the largest difference over the output's range
COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric")


def _onnx2tf_python():
    try:
        return tflite_env.python()
    except (RuntimeError, FileNotFoundError) as e:
        if os.environ.get("CUSTOMOPS_REQUIRE_TFLITE_TEST"):
            raise
        pytest.skip(f"no TF-Lite environment: {e}")


def _litert_ready() -> None:
    try:
        customops.litert.require_supported_torch()
    except RuntimeError as e:
        pytest.skip(str(e))
    if importlib.util.find_spec("litert_torch") is None:
        if os.environ.get("CUSTOMOPS_REQUIRE_LITERT_TEST"):
            pytest.fail("litert-torch is not installed in this environment (requirements/torch-2.11.txt has it)")
        pytest.skip("litert-torch is not installed")


CONVERTERS = [pytest.param("onnx2tf", id="onnx2tf"), pytest.param("litert-torch", id="litert_torch")]


def _ready(converter: str) -> None:
    _onnx2tf_python() if converter == "onnx2tf" else _litert_ready()


# --- every op's samples ---------------------------------------------------------------------------------------


def _representable(op: OpInfo, sample, converter: str) -> bool:
    """What a TF-Lite model can hold (tflite.unsupported says why the rest cannot)."""
    tensors = [a for a in sample.args if isinstance(a, torch.Tensor)]
    inputs = tensors + [v for v in sample.kwargs.values() if isinstance(v, torch.Tensor)]
    if any(t.numel() == 0 for t in inputs):
        return False
    if not op.converts_to_tflite:
        return False
    return not (converter == "onnx2tf" and op.takes_image and tensors[0].dim() == 3)


@pytest.mark.parametrize("converter", CONVERTERS)
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_samples_convert_and_match(op: OpInfo, converter: str):
    _ready(converter)
    samples = list(op.sample_inputs("cpu", torch.float32, False))
    kept = [s for s in samples if _representable(op, s, converter)]
    skipped = [s for s in samples if not _representable(op, s, converter)]
    if kept:
        built = [op.module(s) for s in kept]
        inputs = tuple(a for _, args in built for a in args)
        report = check(SideBySide(built).eval(), inputs, runtime="tflite", converter=converter, atol=ATOL)
        assert len(report.outputs) == len(kept)
        for sample, diff in zip(kept, report.outputs):
            assert diff <= ATOL, f"{op.name}[{sample.name}] through {converter}: max |diff| {diff:.2e}\n{report}"
        assert not [f for f in report.flags if f.kind in ("tflite_op", "unsupported")], report
    # The rest is reported, never silently converted into something else.
    for sample in skipped[:2]:
        model, args = op.module(sample)
        report = check(model.eval(), tuple(args), runtime="tflite", converter=converter)
        assert not report.ok and [f.kind for f in report.flags] == ["unsupported"], f"{sample.name}: {report}"


# --- the operators of the converted model -----------------------------------------------------------------------


class EveryMode(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ups = nn.ModuleList(customops.UpsampleBilinear2d(size=(13, 9), coordinate_mode=m)
                                 for m in COORDINATE_MODES)
        self.depthwise = customops.DepthwiseConv2d(3, 6, 5, stride=2, padding=2)

    def forward(self, x):
        return tuple(up(x) for up in self.ups) + (self.depthwise(x),)


@pytest.mark.parametrize("converter", CONVERTERS)
def test_resizes_and_depthwise_are_tflite_builtins(converter, tmp_path):
    _ready(converter)
    torch.manual_seed(0)
    path = str(tmp_path / "m.tflite")
    report = check(EveryMode().eval(), (torch.randn(2, 3, 6, 5),), runtime="tflite", converter=converter,
                   atol=ATOL, save_tflite=path)
    assert report.ok and not report.flags, report
    resizes = sorted((o["options"].get("alignCorners", False), o["options"].get("halfPixelCenters", False))
                     for o in report.tflite_operators if o["op"] == "RESIZE_BILINEAR")
    assert resizes == sorted(tflite.RESIZE_FLAGS.values()), report.tflite_operators
    assert [o["op"] for o in report.tflite_operators].count("DEPTHWISE_CONV_2D") == 1
    assert os.path.getsize(path) > 0 and report.tflite_path == path
    # The saved model is the deployable one: the model's outputs, not the ops' values the check compared.
    assert _output_count(path, converter) == len(EveryMode().ups) + 1


def _output_count(path: str, converter: str) -> int:
    python = tflite_env.python() if converter == "onnx2tf" else sys.executable
    code = ("import sys; from ai_edge_litert.interpreter import Interpreter; "
            "print(len(Interpreter(model_path=sys.argv[1]).get_output_details()))")
    out = subprocess.run([python, "-I", "-c", code, path], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


def test_plain_export_loses_the_modes_in_onnx2tf():
    # What the onnx2tf_opset flag warns of: a plain export (opset 18 or later) converted by onnx2tf makes every
    # resize half_pixel, so the align_corners and asymmetric ones come out wrong.
    _onnx2tf_python()
    torch.manual_seed(0)
    model, x = EveryMode().eval(), torch.randn(1, 3, 6, 5)
    proto = torch.onnx.export(model, (x,), dynamo=True, verbose=False).model_proto
    assert next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")) > tflite.ONNX2TF_OPSET
    names = [o.name for o in proto.graph.output]
    converted = tflite.run(proto, [x], names, resolvers=("AUTO",))
    flags = [(o["options"].get("alignCorners", False), o["options"].get("halfPixelCenters", False))
             for o in converted["operators"] if o["op"] == "RESIZE_BILINEAR"]
    assert flags and set(flags) == {(False, True)}, flags  # (onnx2tf merges the three, now alike)
    with torch.no_grad():
        expected = model(x)
    diffs = [float(np.abs(tflite.from_layout(got, want.shape) - want.numpy()).max())
             for got, want in zip(converted["runs"]["AUTO"], expected)]
    assert diffs[0] <= ATOL and min(diffs[1:3]) > 0.1, diffs


@pytest.mark.parametrize("converter", CONVERTERS)
def test_square_image_with_as_many_channels(converter):
    # NCHW and NHWC have the same shape here: the input must still go in the converter's own layout.
    _ready(converter)
    torch.manual_seed(0)
    model = nn.Sequential(customops.DepthwiseConv2d(3, 6, 3, padding=1), customops.QuickGELU()).eval()
    report = check(model, (torch.randn(3, 3, 3, 3),), runtime="tflite", converter=converter, atol=ATOL,
                   tflite_resolvers=("AUTO",))
    assert report.ok, report


def test_operator_flags_name_a_changed_resize():
    # As the opset-18 conversion does: an asymmetric resize that became half_pixel in the TF-Lite model.
    model = EveryMode().eval()
    ops = [n for n in torch.export.export(model, (torch.randn(1, 3, 6, 5),)).graph.nodes
           if n.op == "call_function" and n.target.namespace == "customops"]
    operators = [{"op": "RESIZE_BILINEAR", "options": {"halfPixelCenters": True}}] * 3
    flags = list(tflite.operator_flags(operators + [{"op": "CUSTOM:FlexConv2D", "options": {}}], ops))
    kinds = [f.kind for f in flags]
    assert kinds.count("tflite_op") == 4, flags  # the foreign op, two resizes, the missing depthwise
    assert any("asymmetric" in f.message for f in flags) and any("FlexConv2D" in f.message for f in flags)


# --- the example networks ---------------------------------------------------------------------------------------


def _train_export():
    sys.path.insert(0, os.path.join(ROOT, "examples", "deploy"))
    try:
        import train_export
    finally:
        sys.path.pop(0)
    return train_export


def _segmenter():
    return _train_export().build(steps=2)


def _mobilenet():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = customops.convert(torchvision.models.mobilenet_v2(num_classes=10).eval())
    return model, (torch.randn(1, 3, 64, 64),)


def _relative(report, expected) -> float:
    return max(d / max(float(e.max() - e.min()), 1e-12) for d, e in zip(report.outputs, expected))


@pytest.mark.parametrize("converter", CONVERTERS)
@pytest.mark.parametrize("net", ["segmenter", "mobilenet_v2"])
def test_example_networks(net, converter):
    if not FULL_TESTS and (net, converter) == ("segmenter", "onnx2tf"):
        pytest.skip("compact sample: test_example_script converts the segmenter with onnx2tf "
                    "(CUSTOMOPS_FULL_TESTS=1 runs it here too)")
    _ready(converter)
    model, args = _segmenter() if net == "segmenter" else _mobilenet()
    with torch.no_grad():
        expected = [model(*args)]
    report = check(model, args, runtime="tflite", converter=converter, atol=float("inf"))
    assert _relative(report, expected) <= NET_RTOL, report
    assert not [f for f in report.flags if f.kind in ("tflite_op", "unsupported")], report


def test_example_script(tmp_path):
    _onnx2tf_python()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "deploy", "to_tflite.py"), "--steps", "2",
                          "--out", str(tmp_path)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "RESIZE_BILINEAR(asymmetric) x2" in out.stdout and out.stdout.rstrip().endswith("parity: OK")
    assert (tmp_path / "model.tflite").is_file()


def test_full_integer_segmenter():
    # No goal for int8 (docs/deploy.md has the measured figures), only that the full-integer model converts
    # with the representative data, runs, and stays close to the float model.
    _onnx2tf_python()
    model, args = _segmenter()
    calibration, _ = _train_export().synthetic_batch(16, torch.Generator().manual_seed(3))
    report = check(model, args, runtime="tflite", atol=float("inf"), tflite_resolvers=("AUTO",),
                   int8_calibration=calibration)
    assert len(report.int8_outputs) == 1 and 0 < report.int8_outputs[0] < 0.1, report
    assert "int8 (full-integer) model" in str(report)


# --- what needs neither converter ---------------------------------------------------------------------------------


def test_onnx2tf_rewrite_keeps_the_values():
    # The strided and dilated Conv split into a dense Conv and a Slice, at opset 17: the same numbers in ONNX
    # Runtime, and the op's value keeps its name.
    ort = pytest.importorskip("onnxruntime")
    model = nn.Sequential(customops.DepthwiseConv2d(3, 6, 3, stride=(2, 3), padding=(1, 0), dilation=(2, 1)),
                          customops.Conv2d(6, 4, 3, stride=2, dilation=2, padding=2)).eval()
    x = torch.randn(2, 3, 17, 19)
    proto = torch.onnx.export(model, (x,), dynamo=True, verbose=False).model_proto
    rewritten = tflite.for_onnx2tf(proto)
    opset = next(o.version for o in rewritten.opset_import if o.domain in ("", "ai.onnx"))
    assert opset == tflite.ONNX2TF_OPSET
    convs = [n for n in rewritten.graph.node if n.op_type == "Conv"]
    assert len(convs) == 2 and all(list(a.ints) == [1, 1] for n in convs for a in n.attribute if a.name == "strides")
    assert [n.op_type for n in rewritten.graph.node].count("Slice") == 2
    session = ort.InferenceSession(rewritten.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(got), model(x), rtol=1e-5, atol=1e-5)


def test_layouts():
    from customops.deploy.tflite_worker import to_layout

    square = np.arange(81, dtype=np.float32).reshape(1, 3, 3, 9)[..., :3].copy()  # (1, 3, 3, 3)
    assert to_layout(square, (1, 3, 3, 3), True).tolist() == np.moveaxis(square, 1, -1).tolist()
    assert to_layout(square, (1, 3, 3, 3), False).tolist() == square.tolist()
    assert to_layout(np.float32(2.5).reshape(()), (1,), False).tolist() == [2.5]
    with pytest.raises(ValueError, match="does not fit"):
        to_layout(square, (1, 3, 9), True)
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    assert tflite.from_layout(np.moveaxis(a, 1, -1), a.shape).tolist() == a.tolist()
    assert tflite.from_layout(a[:, :, 0, 0], (2, 3)).tolist() == a[:, :, 0, 0].tolist()
    with pytest.raises(ValueError, match="fits no layout"):
        tflite.from_layout(a, (5, 4, 3, 2))


def test_litert_refuses_a_torch_outside_its_range():
    with pytest.raises(RuntimeError, match=r"litert-torch 0.10 supports torch 2.4 to 2.14, this is torch 2.15.0"):
        customops.litert.require_supported_torch("2.15.0+cu132")
    customops.litert.require_supported_torch("2.11.0")
    if not torch.__version__.startswith(("2.11", "2.12", "2.13", "2.14")):
        model = customops.QuickGELU().eval()
        with pytest.raises(RuntimeError, match="Convert through ONNX instead"):
            check(model, (torch.randn(1, 3, 4, 4),), runtime="tflite", converter="litert-torch")


def test_missing_environment_names_the_setup_command(monkeypatch, tmp_path):
    monkeypatch.delenv("CUSTOMOPS_TFLITE_PYTHON", raising=False)
    monkeypatch.setenv("CUSTOMOPS_TFLITE_ENV", str(tmp_path / "none"))
    monkeypatch.setattr(tflite_env, "_has_converter", lambda: False)
    with pytest.raises(RuntimeError, match="python -m customops.deploy.tflite_env"):
        tflite_env.python()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tflite_env.python(str(tmp_path / "missing" / "python"))


def test_cli_tflite(tmp_path):
    _onnx2tf_python()
    (tmp_path / "mymodel.py").write_text(
        "import torch, customops\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    model = torch.nn.Sequential(customops.DepthwiseConv2d(3, 3, 3, padding=1), customops.QuickGELU(),\n"
        "                                customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode='asymmetric'))\n"
        "    return model, torch.randn(1, 3, 8, 8)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "customops.deploy.check", "mymodel:build", "--runtime", "tflite",
                          "--save", "m.tflite"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "TF-Lite via onnx2tf" in out.stdout and "RESIZE_BILINEAR(asymmetric) x1" in out.stdout
    assert (tmp_path / "m.tflite").is_file()
