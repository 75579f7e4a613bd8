"""The Python package and the shared library it loads."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import customops

pytestmark = pytest.mark.torch_dependent


def test_import_from_any_working_directory(tmp_path):
    code = "import torch, customops; print(customops.library_path()); print(customops.quick_gelu(torch.ones(2)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[0] == customops.library_path()


def test_library_path_points_at_the_loaded_library():
    path = Path(customops.library_path())
    assert path.is_absolute() and path.name == "libcustomops.so" and path.exists()
    maps = Path("/proc/self/maps").read_text()
    assert str(path) in maps


def test_library_was_built_for_this_torch():
    assert customops.build_info()["torch_version"] == torch.__version__


def test_library_has_no_python_dependency():
    data = Path(customops.library_path()).read_bytes()
    # No DT_NEEDED on libpython, no extension-module entry point, no pybind11.
    assert b"libpython" not in data
    assert b"PyInit_" not in data
    assert b"pybind11" not in data


def test_library_shares_libstdcxx_with_torch():
    # A static libstdc++ copy inside libcustomops crashes when C++ objects cross into libtorch.
    assert b"libstdc++.so.6" in Path(customops.library_path()).read_bytes()


def test_wrong_torch_version_is_refused(tmp_path):
    lib = tmp_path / "libcustomops.so"
    lib.symlink_to(customops.library_path())
    (tmp_path / "build_info.json").write_text('{"torch_version": "0.0.1"}')
    env = dict(os.environ, CUSTOMOPS_LIBRARY=str(lib))
    out = subprocess.run([sys.executable, "-c", "import customops"], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    message = out.stderr.strip().splitlines()[-1]
    assert message.startswith("ImportError: customops: ")
    assert f"built against torch 0.0.1, but this Python has torch {torch.__version__}" in message
    assert "pip install --no-build-isolation" in message


@pytest.mark.skipif(not os.environ.get("CUSTOMOPS_OTHER_TORCH_LIBRARY"),
                    reason="needs CUSTOMOPS_OTHER_TORCH_LIBRARY: a libcustomops.so built against another torch "
                           "(scripts/test.sh sets it when it tests its second torch)")
def test_library_built_against_another_torch_release_is_refused():
    # A real library of another torch release, its build_info.json beside it: importing it must give
    # the clear error, where loading it unchecked ends in an undefined symbol or a crash.
    lib = Path(os.environ["CUSTOMOPS_OTHER_TORCH_LIBRARY"])
    built_for = json.loads((lib.parent / "build_info.json").read_text())["torch_version"]
    assert built_for != torch.__version__
    env = dict(os.environ, CUSTOMOPS_LIBRARY=str(lib))
    out = subprocess.run([sys.executable, "-c", "import customops"], env=env, capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    message = out.stderr.strip().splitlines()[-1]
    assert f"built against torch {built_for}, but this Python has torch {torch.__version__}" in message


def test_supported_torch_range_is_tested_at_both_ends():
    # pyproject.toml declares the range (CMake reads it too); requirements/torch-<version>.txt are the
    # environments the tests run in: the oldest supported release and the newest must both have one.
    root = Path(__file__).resolve().parents[2]
    text = (root / "pyproject.toml").read_text()
    low, below = re.search(r'"torch>=([0-9.]+),<([0-9.]+)"', text).groups()
    tested = sorted(tuple(map(int, p.stem.removeprefix("torch-").split("."))) for p in (root / "requirements").glob("torch-*.txt"))
    as_tuple = lambda v: tuple(map(int, v.split(".")))  # noqa: E731
    assert tested[0] == as_tuple(low)[:2], f"the oldest supported torch {low} has no requirements file"
    assert tested[-1] < as_tuple(below) and (tested[-1][0], tested[-1][1] + 1) == as_tuple(below)[:2], \
        f"the newest requirements file {tested[-1]} is not the last release below {below}"
    for version in tested:
        pins = (root / "requirements" / f"torch-{version[0]}.{version[1]}.txt").read_text()
        assert re.search(rf"^torch=={version[0]}\.{version[1]}\.\d+$", pins, re.M), pins
    assert "requirements/torch-{}.{}.txt".format(*tested[-1]) in (root / "requirements.txt").read_text()
