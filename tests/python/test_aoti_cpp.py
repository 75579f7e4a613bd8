"""AOTInductor: one model calling every operator, exported and compiled into a package in
Python, run by the C++ runner (examples/aoti_runner.cpp) on the same inputs; its outputs
must equal eager Python's.

Compiling runs the C++ compiler over the generated code (a minute or two on a 2-core
machine), so each device compiles one package per test session, shared by the tests.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import customops
from conftest import requires_cuda
from op_db import OP_DB
from test_registry import registered_ops

pytestmark = pytest.mark.torch_dependent


def _sample(op, device):
    return next(s for s in op.sample_inputs(device, torch.float32, False)
                if all(t.numel() > 0 for t in s.tensors()) and s.tensors()[0].dim() > 0)


def customops_calls(exported) -> set[str]:
    return {n.target._schema.name.split("::", 1)[1] for n in exported.graph.nodes
            if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace == "customops"}


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=requires_cuda)])
def package(request, tmp_path_factory):
    device = request.param
    models, inputs = [], []
    for op in OP_DB:
        module, args = op.module(_sample(op, device))
        models.append(module.eval())
        inputs.append([t.detach() for t in args])
    model = customops.aoti.Bundle(models, [len(a) for a in inputs])
    flat = [t for args in inputs for t in args]
    exported = torch.export.export(model, tuple(flat))
    tmp = tmp_path_factory.mktemp(f"aoti_{device}")
    path = customops.aoti.compile_package(exported, flat, tmp / "model.pt2")
    customops.aoti.save_inputs(flat, tmp / "inputs.pt")
    with torch.no_grad():
        expected = model(*flat)
    return {"device": device, "path": path, "inputs": tmp / "inputs.pt", "expected": expected,
            "exported": exported, "tmp": tmp}


def run_runner(*args):
    return subprocess.run([customops.runner_path("aoti"), *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.every_op
def test_model_calls_every_operator(package):
    # The comparison below only means something if the compiled model calls every op.
    forward_ops = {name for name in registered_ops() if not name.endswith("_backward")}
    assert customops_calls(package["exported"]) == forward_ops


@pytest.mark.every_op
def test_cpp_runner_matches_eager_python(package):
    out = package["tmp"] / "out.pt"
    done = run_runner(package["path"], "--inputs", package["inputs"], "--device", package["device"],
                      "--repeats", "2", "--output", out)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    expected = package["expected"]
    assert report["shapes"] == [list(e.shape) for e in expected]
    outputs = torch.load(out)
    assert len(outputs) == len(expected) == len(OP_DB)
    for op, got, want in zip(OP_DB, outputs, expected):
        torch.testing.assert_close(got, want.cpu(), msg=lambda m, op=op: f"{op.name}: {m}")


@pytest.mark.every_op
def test_python_loader_matches_eager_python(package):
    # The same package through torch's own Python loader: the two C++ paths agree.
    loaded = torch._inductor.aoti_load_package(package["path"])
    flat = [t.to(package["device"]) for t in torch.load(package["inputs"])]
    with torch.no_grad():
        for got, want in zip(loaded(*flat), package["expected"]):
            torch.testing.assert_close(got, want)


def test_runner_refuses_a_package_for_another_device(package):
    if package["device"] != "cpu":
        pytest.skip("one direction is enough; the CPU package exists on every machine")
    done = run_runner(package["path"], "--inputs", package["inputs"], "--device", "cuda")
    assert done.returncode != 0
    assert "was compiled for cpu, not for --device cuda" in done.stderr


def test_compiler_that_links_libstdcxx_statically_is_refused(tmp_path):
    # A g++ that links libstdc++ statically, as on the GPU machine's $CXX.
    static_gxx = tmp_path / "g++-static-libstdc++"
    static_gxx.write_text('#!/bin/sh\nexec g++ -static-libstdc++ "$@"\n')
    static_gxx.chmod(0o755)
    with pytest.raises(customops.aoti.StaticLibstdcxxError, match=r"export CXX=/usr/bin/g\+\+"):
        customops.aoti.check_compiler(str(static_gxx))
    assert customops.aoti.check_compiler("g++") == "g++"


def test_compile_package_checks_the_compiler_named_by_cxx(tmp_path):
    # torch._inductor reads $CXX when imported, hence a fresh interpreter.
    static_gxx = tmp_path / "g++-static-libstdc++"
    static_gxx.write_text('#!/bin/sh\nexec g++ -static-libstdc++ "$@"\n')
    static_gxx.chmod(0o755)
    code = ("import torch, customops\n"
            "customops.aoti.compile_package(customops.QuickGELU(), (torch.ones(2),), 'never.pt2')\n")
    env = {**os.environ, "CXX": str(static_gxx)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "StaticLibstdcxxError" in done.stderr and str(static_gxx) in done.stderr
    assert not Path(tmp_path / "never.pt2").exists()
