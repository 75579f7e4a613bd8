"""TorchScript models saved from Python, loaded and run by the C++ example app."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import requires_cuda
from op_db import OP_DB

pytestmark = pytest.mark.torch_dependent


def runner() -> Path:
    build = Path(os.environ.get("CUSTOMOPS_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
    path = build / "examples" / "customops_torchscript"
    if not path.exists():
        pytest.fail(f"{path} is missing: build the project (scripts/build.sh) or set CUSTOMOPS_BUILD_DIR")
    return path


def _sample(op, device):
    return next(s for s in op.sample_inputs(device, torch.float32, False)
                if all(t.numel() > 0 for t in s.tensors()) and s.tensors()[0].dim() > 0)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_cuda)])
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_cpp_app_runs_scripted_model(op, device, tmp_path):
    module, inputs = op.module(_sample(op, device))
    module.example_inputs = [t.detach().cpu() for t in inputs]
    model_path, output_path = tmp_path / "model.pt", tmp_path / "out.pt"
    torch.jit.script(module).save(str(model_path))

    result = subprocess.run([str(runner()), str(model_path), "--device", device, "--repeats", "3",
                             "--output", str(output_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    expected = module(*inputs)
    assert report["shape"] == list(expected.shape)
    torch.testing.assert_close(torch.load(output_path), expected.cpu())


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_cuda)])
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_cpp_app_runs_scripted_model_from_threads(op, device, tmp_path):
    """One loaded module called from several C++ threads at once gives the single-threaded output: bit for bit,
    but where the OpInfo's cuda_concurrent_bitwise says otherwise on CUDA (cuBLAS, in conv2d's explicit path, whose
    host threads get handles of their own)."""
    module, inputs = op.module(_sample(op, device))
    module.example_inputs = [t.detach().cpu() for t in inputs]
    model_path = tmp_path / "model.pt"
    torch.jit.script(module).save(str(model_path))

    result = subprocess.run([str(runner()), str(model_path), "--device", device, "--repeats", "20", "--threads", "4"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["threads"] == 4
    if device == "cuda" and not op.cuda_concurrent_bitwise:
        assert report["max_abs_diff"] < 1e-4, report
    else:
        assert report["mismatches"] == 0, report
