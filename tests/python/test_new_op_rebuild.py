"""Adding an operator compiles its own objects and the schemas, not the library's: a copy of the tracked sources is
built (CPU only, with the C++ tests and ExecuTorch's kernels where the build finds them, through the scripts'
compiler cache), a pointwise op is added with the scaffold, and the rebuild's compilations, read from Ninja's log,
are checked. No header that lists every op may reach more than the one C++ test that checks it compiles.

Build-heavy: one build of a copy (about a minute with a warm compiler cache, every object a cache hit; the first
run on a machine compiles it once) and the new op's few objects."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from customops.dev import new_op
from source_tree import build_copy, copy_tracked_sources

NAME = "rebuild_probe"

pytestmark = [
    pytest.mark.skipif(shutil.which("ninja") is None, reason="the rebuild is read from Ninja's log"),
    pytest.mark.skipif(shutil.which("cmake") is None, reason="no cmake"),
    pytest.mark.torch_independent,
]


def _build(tree: Path) -> None:
    """Configures (once) and builds tree/build, CPU only, with the scripts' cache settings."""
    build_copy(tree, "-DCUSTOMOPS_BUILD_TESTS=ON", target=None)


def _logged(build: Path) -> dict:
    """Ninja's log: each output's last recorded mtime (a rebuilt output gets a new one; the log may be compacted)."""
    lines = (build / ".ninja_log").read_text().splitlines()
    return {fields[3]: fields[2] for fields in (line.split("\t") for line in lines if line and line[0] != "#")}


def test_a_new_pointwise_op_compiles_only_its_own_objects_and_the_schemas(tmp_path):
    tree = tmp_path / "customops"
    copy_tracked_sources(tree)
    _build(tree)
    before = _logged(tree / "build")
    assert new_op.main([NAME, "--inputs", "x", "--root", str(tree)]) == 0
    _build(tree)
    compiled = sorted(o for o, mtime in _logged(tree / "build").items()
                      if o.endswith((".o", ".gch")) and before.get(o) != mtime)
    # Its kernels per CPU instruction set, registration and ExecuTorch kernel (written by CMake from its header into
    # build/pointwise/), the schemas' file, which the scaffold edits, and the C++ test of <customops/ops.h>; nothing
    # of another op, no precompiled header.
    own = [o for o in compiled if "/pointwise/" in o and o.endswith(f"/{NAME}.cpp.o")]
    shared = ["CMakeFiles/customops.dir/registration/schemas.cpp.o",
              "tests/cpp/CMakeFiles/customops_tests.dir/test_registration.cpp.o"]
    assert sorted(set(compiled) - set(own)) == shared, compiled
    assert f"CMakeFiles/customops.dir/pointwise/registration/{NAME}.cpp.o" in own and len(own) >= 2, compiled
