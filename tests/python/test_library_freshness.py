"""A source checkout's `import customops` refuses a library older than the one its build folder holds: a rebuild
that no install followed (`cmake --build` in an editable install's build folder) would otherwise leave Python on the
code of before it, silently."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import customops
from customops import _library

pytestmark = pytest.mark.torch_independent


def _library_pair(tmp_path: Path, installed: bytes, built: bytes, built_later: bool):
    """An installed library and its build folder's, `built_later` or not; (installed path, its build_info)."""
    lib, build = tmp_path / "site" / "lib" / "libcustomops.so", tmp_path / "build" / "libcustomops.so"
    for path, data in ((lib, installed), (build, built)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    now = lib.stat().st_mtime
    os.utime(build, (now + (60 if built_later else -60),) * 2)
    return lib, {"build_dir": str(build.parent)}


def test_a_later_different_build_is_what_makes_a_library_stale(tmp_path):
    lib, info = _library_pair(tmp_path, b"before", b"after", built_later=True)
    assert _library._older_than_build(lib, info) == Path(info["build_dir"]) / "libcustomops.so"
    # Installed after the build (pip copies it with a new time), or built again into the same bytes: not stale.
    lib, info = _library_pair(tmp_path / "a", b"before", b"after", built_later=False)
    assert _library._older_than_build(lib, info) is None
    lib, info = _library_pair(tmp_path / "b", b"same", b"same", built_later=True)
    assert _library._older_than_build(lib, info) is None
    # No build folder recorded (a library of an older customops), or gone (a wheel's temporary build).
    assert _library._older_than_build(lib, {}) is None
    assert _library._older_than_build(lib, {"build_dir": str(tmp_path / "gone")}) is None
    # The build folder's own library (CUSTOMOPS_LIBRARY pointing there, a plain build's copy): nothing to compare.
    build_lib = Path(info["build_dir"]) / "libcustomops.so"
    assert _library._older_than_build(build_lib, info) is None


def test_import_refuses_a_library_older_than_its_build(tmp_path):
    # The library this process loaded, copied as if installed, its build folder's copy rebuilt later: the import
    # that loads the installed copy must fail and say how to install the rebuild.
    installed = tmp_path / "site" / "lib" / "libcustomops.so"
    installed.parent.mkdir(parents=True)
    shutil.copyfile(customops.library_path(), installed)
    build = tmp_path / "build"
    build.mkdir()
    info = {**customops.build_info(), "build_dir": str(build)}
    (installed.parent / "build_info.json").write_text(json.dumps(info))
    env = {**os.environ, "CUSTOMOPS_LIBRARY": str(installed)}

    def import_customops():
        return subprocess.run([sys.executable, "-c", "import customops"], env=env, capture_output=True, text=True)

    (build / "libcustomops.so").write_bytes(installed.read_bytes() + b"\0")  # rebuilt: other bytes
    now = installed.stat().st_mtime
    os.utime(build / "libcustomops.so", (now - 60,) * 2)
    done = import_customops()
    assert done.returncode == 0, done.stderr  # the build older than the install: loads
    os.utime(build / "libcustomops.so", (now + 60,) * 2)
    done = import_customops()
    assert done.returncode != 0
    assert "is older than the library built in its build folder" in done.stderr, done.stderr
    assert "scripts/build.sh" in done.stderr and f"-C build-dir={build}" in done.stderr
