"""The Python package and the shared library it loads."""

import os
import subprocess
import sys
from pathlib import Path

import torch

import customops


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
    assert "built against torch 0.0.1" in out.stderr
