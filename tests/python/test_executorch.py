"""ExecuTorch: every op's samples exported, lowered (XNNPACK delegate on and off), made a program and run by
ExecuTorch's runtime, against eager PyTorch (customops.executorch)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import customops
import customops.deploy
from op_db import OP_DB, OpInfo

pytest.importorskip("executorch.exir", reason="needs executorch (requirements/torch-2.15.txt)")
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from customops.deploy.pte import execute  # noqa: E402

# A compact sample of each op (a conversion takes seconds): its first sample with data (ExecuTorch's planner
# takes no empty tensors); test_the_decompositions_compute_the_ops checks every sample.
SAMPLES_PER_OP = 1


def _samples(op: OpInfo):
    samples = [s for s in op.sample_inputs("cpu", torch.float32, False) if all(t.numel() > 0 for t in s.tensors())]
    return samples[:SAMPLES_PER_OP]


def _run(program, inputs):
    return execute(program.buffer, inputs)


def test_every_op_has_a_core_aten_decomposition():
    table = customops.executorch.decompositions()
    assert {op.overload for op in OP_DB} <= set(table), {op.name for op in OP_DB} - {o.name() for o in table}


def _as_in_a_graph(op: OpInfo, kwargs: dict) -> dict:
    """The arguments as an exported graph passes them: an int given for an int[2] is a pair."""
    lists = {a.name for a in op.overload._schema.arguments if str(a.type).startswith(("List[int]", "List[SymInt]"))}
    return {k: [v, v] if k in lists and isinstance(v, int) else list(v) if k in lists else v
            for k, v in kwargs.items()}


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_the_decompositions_compute_the_ops(op: OpInfo):
    decomposition = customops.executorch.decompositions()[op.overload]
    for dtype in (torch.float32, torch.float64):
        for sample in op.sample_inputs("cpu", dtype, False):
            want = op.overload(*sample.args, **sample.kwargs)
            got = decomposition(*sample.args, **_as_in_a_graph(op, sample.kwargs))
            rtol, atol = op.tolerances[dtype]
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"{sample.name} {dtype}: {m}")


def test_importing_executorch_registers_the_ops():
    import executorch.exir.program._program  # noqa: F401

    assert customops.executorch.is_registered(), customops.executorch.error


@pytest.mark.parametrize("delegate", [True, False], ids=["xnnpack", "portable"])
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_programs_run_what_eager_runs(op: OpInfo, delegate):
    for sample in _samples(op):
        module, inputs = op.module(sample)
        with torch.no_grad():
            want = module(*inputs)
        exported = torch.export.export(module, tuple(inputs))
        program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()] if delegate else None)
        program = program.to_executorch()
        ops = [str(n.target) for n in program.exported_program().graph.nodes if n.op == "call_function"]
        assert not any("customops" in o for o in ops), ops
        (got,) = _run(program, inputs)
        scale = max(1.0, float(want.abs().max()))
        assert got.shape == want.shape, sample.name
        assert float((got - want).abs().max()) <= 1e-5 * scale, f"{sample.name}: {(got - want).abs().max()}"


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
