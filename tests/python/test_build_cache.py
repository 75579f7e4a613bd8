"""The compiler cache the scripts build with (scripts/caches.sh): a second configure and build of the same
sources in another folder, as a fresh clone is, compiles nothing new. Skipped where ccache is not installed or
the scripts are told to build without it (CUSTOMOPS_CCACHE=0)."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from source_tree import copy_tracked_sources

pytestmark = [
    pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed"),
    pytest.mark.skipif(os.environ.get("CUSTOMOPS_CCACHE") == "0", reason="CUSTOMOPS_CCACHE=0: no compiler cache"),
    pytest.mark.skipif(shutil.which("ninja") is None, reason="the object targets are named as Ninja names them"),
    pytest.mark.torch_independent,
]


def _objects() -> list:
    """A C++ source with its precompiled torch headers and a CPU kernel variant's (both written into the build tree
    from a pointwise op's header, cmake/CustomopsPointwise.cmake), and a CUDA source where the build has CUDA
    kernels."""
    objects = ["CMakeFiles/customops.dir/pointwise/registration/quick_gelu.cpp.o",
               "CMakeFiles/customops_cpu_DEFAULT.dir/pointwise/cpu/quick_gelu.cpp.o"]
    if torch.version.cuda and "CUSTOMOPS_WITH_CUDA=OFF" not in os.environ.get("CUSTOMOPS_CMAKE_ARGS", ""):
        objects.append("CMakeFiles/customops.dir/kernels/cuda/common/memory_format.cu.o")
    return objects


def _build(tree: Path, stats_log: Path) -> None:
    """Configures and builds the objects in tree/build with the scripts' cache settings, the leg's CMake
    arguments (CUSTOMOPS_CMAKE_ARGS, as scripts/env.sh exports them) and this Python's torch."""
    args = " ".join(shlex.quote(a) for a in os.environ.get("CUSTOMOPS_CMAKE_ARGS", "").split())
    script = (f"ROOT={shlex.quote(str(tree))}; source scripts/caches.sh && "
              f"cmake -S . -B build -G Ninja -DCUSTOMOPS_PYTHON={shlex.quote(sys.executable)} "
              f"-DCUSTOMOPS_BUILD_TESTS=OFF -DCUSTOMOPS_BUILD_EXAMPLES=OFF -DCUSTOMOPS_STAGE_PYTHON=OFF {args} && "
              f"CCACHE_STATSLOG={shlex.quote(str(stats_log))} cmake --build build --target "
              + " ".join(_objects()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCACHE_", "CMAKE_"))}
    done = subprocess.run(["bash", "-c", script], cwd=tree, capture_output=True, text=True, env=env, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in _objects():
        assert (tree / "build" / name).exists(), f"{name} was not built"


def _results(stats_log: Path) -> dict:
    """ccache's stats log: a '# <source>' line per compilation, then its counters; the result of each."""
    results, source = {}, None
    for line in stats_log.read_text().splitlines():
        if line.startswith("# "):
            source = line[2:]
            results[source] = set()
        elif source is not None and line.strip():
            results[source].add(line.strip())
    return results


def test_a_second_tree_of_the_same_sources_compiles_nothing_new(tmp_path):
    first, second = tmp_path / "first" / "customops", tmp_path / "second" / "customops"
    for tree in (first, second):
        copy_tracked_sources(tree)
    _build(first, tmp_path / "first.log")
    _build(second, tmp_path / "second.log")
    results = _results(tmp_path / "second.log")
    compiled = {source: r for source, r in results.items() if "called_for_link" not in r}
    # The precompiled headers (one per target) and the objects above.
    assert len(compiled) >= len(_objects()) + 2, results
    missed = {source: sorted(r) for source, r in compiled.items() if not r & {"direct_cache_hit",
                                                                            "preprocessed_cache_hit"}}
    assert not missed, f"compiled again in the second tree: {missed}"
