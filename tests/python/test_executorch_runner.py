"""The C++ runner (examples/executorch_runner.cpp: ExecuTorch's runtime, its CPU kernels and XNNPACK delegate, and
customops' ExecuTorch kernels, no libtorch) runs one program that calls every op, lowered with XNNPACK; its outputs
must match eager PyTorch's."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

import customops
from op_db import OP_DB

pytest.importorskip("executorch.exir", reason="needs executorch (requirements/torch-2.15.txt)")
from customops.deploy.pte import lower  # noqa: E402

pytestmark = pytest.mark.torch_dependent


def _runner():
    try:
        return customops.runner_path("executorch_runner")
    except FileNotFoundError:
        pytest.skip("customops_executorch_runner not built (no executorch when customops was)")


def _sample(op):
    return next(s for s in op.sample_inputs("cpu", torch.float32, False) if all(t.numel() > 0 for t in s.tensors()))


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    models, inputs = [], []
    for op in OP_DB:
        module, args = op.module(_sample(op))
        models.append(module.eval())
        inputs.append([t.detach() for t in args])
    model = customops.aoti.Bundle(models, [len(a) for a in inputs])
    flat = [t for args in inputs for t in args]
    tmp = tmp_path_factory.mktemp("executorch_runner")
    path = tmp / "model.pte"
    lowered = lower(torch.export.export(model, tuple(flat)), "xnnpack")
    path.write_bytes(lowered.buffer)
    customops.executorch.save_tensors(tmp / "inputs.bin", flat)
    with torch.no_grad():
        expected = model(*flat)
    kernels = {str(n.target) for n in lowered.exported_program().graph.nodes if str(n.target).startswith("customops.")}
    return {"path": path, "inputs": tmp / "inputs.bin", "expected": expected, "kernels": kernels, "tmp": tmp}


@pytest.mark.every_op
def test_the_runner_runs_every_op_as_eager_pytorch(program):
    runner = _runner()
    out = program["tmp"] / "out.bin"
    result = subprocess.run([runner, program["path"], "--inputs", program["inputs"], "--output", out, "--repeats", "3"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # customops' own kernels ran there (the ops routed to them), beside ExecuTorch's.
    assert program["kernels"] <= {f"customops.{op}.out" for op, r in customops.executorch.routes().items()
                                  if r == "kernel"}
    assert program["kernels"], "no op took customops' kernels"
    report = json.loads(result.stdout.strip().splitlines()[-1])
    got = customops.executorch.load_tensors(out)
    assert [list(t.shape) for t in got] == report["shapes"] == [list(t.shape) for t in program["expected"]]
    for op, g, want in zip(OP_DB, got, program["expected"]):
        scale = max(1.0, float(want.abs().max()))
        assert float((g - want).abs().max()) <= 1e-5 * scale, op.name


def test_the_runner_names_what_it_could_not_read(program, tmp_path):
    result = subprocess.run([_runner(), program["path"], "--inputs", tmp_path / "missing.bin"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and "cannot read" in result.stderr
    customops.executorch.save_tensors(tmp_path / "one.bin", [torch.zeros(2)])
    result = subprocess.run([_runner(), program["path"], "--inputs", tmp_path / "one.bin"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and "inputs" in result.stderr, result.stderr


def test_tensors_round_trip_in_the_runners_format(tmp_path):
    tensors = [torch.randn(2, 3).t(), torch.arange(5), torch.randn(4, dtype=torch.float64),
               torch.randn(2, 2).to(torch.bfloat16), torch.zeros(0, 3), torch.tensor(1.5)]
    customops.executorch.save_tensors(tmp_path / "t.bin", tensors)
    back = customops.executorch.load_tensors(tmp_path / "t.bin")
    for a, b in zip(tensors, back, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)
