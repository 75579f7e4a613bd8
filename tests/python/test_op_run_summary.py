"""An operator's run (`pytest tests/python --op NAME`, the guide's "done" command) names the paths it did not check
and why, and finds the checkout's TF-Lite environment (the one scripts/test.sh makes) without being told."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import skipped_paths
from customops.deploy import tflite_env

pytestmark = pytest.mark.torch_independent

ROOT = Path(__file__).resolve().parents[2]


def _skip(nodeid: str, reason: str):
    return SimpleNamespace(nodeid=nodeid, longrepr=(nodeid.split("::")[0], 1, f"Skipped: {reason}"))


def test_skips_are_counted_per_file_and_reason():
    reports = [_skip("tests/python/test_tflite.py::test_a[onnx2tf-x]", "no TF-Lite environment: none"),
               _skip("tests/python/test_tflite.py::test_b[onnx2tf-x]", "no TF-Lite environment: none"),
               _skip("tests/python/test_ops.py::test_c[x]", "no CUDA device"),
               _skip("tests/python/test_tflite.py::test_d[litert_torch-x]", "litert-torch is not installed")]
    assert skipped_paths(reports) == ["test_ops.py: 1 skipped: no CUDA device",
                                      "test_tflite.py: 1 skipped: litert-torch is not installed",
                                      "test_tflite.py: 2 skipped: no TF-Lite environment: none"]


def test_an_ops_run_names_what_it_skipped(tmp_path):
    # The onnx2tf samples of one op, with no TF-Lite environment anywhere: skipped, and said so after the results.
    env = {k: v for k, v in os.environ.items() if k not in ("CUSTOMOPS_TFLITE_PYTHON", "CUSTOMOPS_REQUIRE_TFLITE_TEST")}
    env["CUSTOMOPS_TFLITE_ENV"] = str(tmp_path / "none")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/python/test_tflite.py", "--op", "quick_gelu", "-k", "samples_convert and onnx2tf"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if "No module named 'onnx'" in run.stdout + run.stderr or "needs the onnx extra" in run.stdout:
        pytest.skip("no onnx extra: test_tflite.py skips as a whole")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    section = run.stdout.split("paths not checked for quick_gelu", 1)
    assert len(section) == 2, run.stdout[-3000:]
    assert "test_tflite.py: 1 skipped: no TF-Lite environment" in section[1], section[1]


def test_the_checkouts_tflite_environment_is_found(monkeypatch, tmp_path):
    checkout = tmp_path / ".venv-tflite"
    (checkout / "bin").mkdir(parents=True)
    (checkout / "bin" / "python").write_text("")
    monkeypatch.delenv("CUSTOMOPS_TFLITE_PYTHON", raising=False)
    monkeypatch.delenv("CUSTOMOPS_TFLITE_ENV", raising=False)
    monkeypatch.setattr(tflite_env, "default_dir", lambda: tmp_path / "no-default")
    monkeypatch.setattr(tflite_env, "checkout_dir", lambda: checkout)
    monkeypatch.setattr(tflite_env, "_has_converter", lambda: False)
    assert tflite_env.python() == str(checkout / "bin" / "python")
    # A folder named by CUSTOMOPS_TFLITE_ENV is the one asked for: a missing one is not replaced by the checkout's.
    monkeypatch.setenv("CUSTOMOPS_TFLITE_ENV", str(tmp_path / "asked"))
    with pytest.raises(RuntimeError, match="python -m customops.deploy.tflite_env"):
        tflite_env.python()
    # This checkout's is where scripts/test.sh makes it.
    monkeypatch.undo()
    assert tflite_env.checkout_dir() == ROOT / ".venv-tflite"
