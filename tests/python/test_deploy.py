"""customops.deploy: the parity report (Python and command line) and the deployment example."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytest.importorskip("onnx", reason="needs the onnx extra: pip install 'customops[onnx]'")
pytest.importorskip("onnxscript", reason="needs the onnx extra: pip install 'customops[onnx]'")
pytest.importorskip("onnxruntime", reason="needs the onnx extra: pip install 'customops[onnx]'")

import customops  # noqa: E402
from customops.deploy import check  # noqa: E402
from customops.deploy.cli import main  # noqa: E402

pytestmark = pytest.mark.torch_dependent

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


class Hazards(nn.Module):
    """One layer of each kind the report flags, beside ordinary ones."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = customops.DepthwiseConv2d(4, 8, 3, padding=1)
        self.act = customops.QuickGELU()
        self.up = customops.UpsampleBilinear2d(size=(10, 10), coordinate_mode="asymmetric")
        self.pool = customops.UpsampleBilinear2d(size=1, coordinate_mode="half_pixel")
        self.unfold = customops.Im2col(3, padding=1)

    def forward(self, x):
        y = self.act(self.conv(x))
        z = self.up(y) + self.pool(y)
        legacy = F.interpolate(y, scale_factor=1.5, mode="bilinear")  # 5 * 1.5: not a whole size
        return z, legacy, self.unfold(z)


def _hazards():
    torch.manual_seed(0)
    return Hazards().eval(), (torch.randn(2, 4, 5, 5),)


def test_report_rows_and_flags():
    model, args = _hazards()
    report = check(model, args, gather_limit_bytes=1024)
    assert report.ok, report
    assert [p.op for p in report.ops] == ["customops.depthwise_conv2d", "customops.quick_gelu",
                                         "customops.upsample_bilinear2d", "customops.upsample_bilinear2d",
                                         "customops.im2col"]
    assert [p.module for p in report.ops] == ["conv", "act", "up", "pool", "unfold"]
    assert report.ops[0].onnx == "Conv(group=4)" and report.ops[2].onnx == "Resize(linear, asymmetric)"
    assert all(p.max_abs_diff is not None and p.max_abs_diff < 1e-5 for p in report.ops), report
    assert len(report.outputs) == 3 and report.max_abs_diff < 1e-5
    kinds = {(f.kind, f.where.split()[0]) for f in report.flags}
    assert ("size_1", report.ops[3].node) in kinds  # the half_pixel resize to 1x1
    assert any(k == "aten_upsample" for k, _ in kinds) and any(k == "scales" for k, _ in kinds)
    assert ("large_gather", report.ops[4].node) in kinds
    assert ("onnx2tf_opset", report.ops[2].node) in kinds  # asymmetric at opset 18+: onnx2tf would drop it
    assert not any(k in ("mismatch", "coordinate_mode") for k, _ in kinds)  # asymmetric is exact everywhere
    text = str(report)
    assert "Resize(linear, asymmetric)" in text and "[size_1]" in text and text.endswith("parity: OK")
    assert report.onnx_program is not None


def test_wrong_translation_is_a_mismatch(monkeypatch):
    # As if the asymmetric translation were wrong: the op's row and the output show it.
    from customops.onnx import upsample

    monkeypatch.setitem(upsample.COORDINATE_MODES, "asymmetric", "half_pixel")
    model, args = _hazards()
    report = check(model, args)
    assert not report.ok
    mismatched = {f.where for f in report.mismatches}
    assert report.ops[2].node in mismatched and "model" in mismatched
    assert report.ops[0].max_abs_diff < 1e-5  # the layers before it still match
    assert str(report).endswith("above atol)")


def test_exported_program_input():
    model, args = _hazards()
    report = check(torch.export.export(model, args), args)
    assert report.ok and len(report.ops) == 5


def test_cli_module_callable(tmp_path):
    (tmp_path / "mymodel.py").write_text(textwrap.dedent("""
        import torch, customops

        def build():
            torch.manual_seed(0)
            model = torch.nn.Sequential(customops.Conv2d(3, 4, 3, padding=1), customops.QuickGELU(),
                                        customops.UpsampleBilinear2d(scale_factor=2, coordinate_mode="align_corners"))
            return model, torch.randn(1, 3, 8, 8)
    """))
    out = subprocess.run([sys.executable, "-m", "customops.deploy.check", "mymodel:build", "--dynamic-batch",
                          "--save", "m.onnx"], cwd=tmp_path, capture_output=True, text=True, env=ENV)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "Resize(linear, align_corners)" in out.stdout and "parity: OK" in out.stdout
    assert (tmp_path / "m.onnx").is_file()


def test_cli_pt2_file(tmp_path, capsys):
    model, args = _hazards()
    path = str(tmp_path / "hazards.pt2")
    torch.export.save(torch.export.export(model, args), path)
    assert main([path]) == 0
    assert main([path, "--strict"]) == 1  # it has flags
    printed = capsys.readouterr().out
    assert "depthwise_conv2d" in printed and "[aten_upsample]" in printed


def test_cli_bad_model_or_file(tmp_path):
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path / "missing.pt2")])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        main(["no_colon_here"])


def test_example_trains_exports_and_reports(tmp_path):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "deploy", "train_export.py"), "--steps", "2",
                          "--out", str(tmp_path)], capture_output=True, text=True, env=ENV, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert (tmp_path / "model.onnx").is_file()
    assert "Resize(linear, asymmetric)" in out.stdout and out.stdout.rstrip().endswith("parity: OK")
