"""A copy of the checkout's tracked sources, for the tests that build one as a fresh clone would."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]


def copy_tracked_sources(dst: Path) -> None:
    """Copies every file git tracks into `dst`; skips the test where the tree is not a git checkout."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked sources cannot be listed")
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dst / name)


def build_env() -> dict:
    """The environment a copy is built in: this one without the compiler-cache and CMake settings of the checkout's
    own build, which scripts/caches.sh sets again for the copy."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("CCACHE_", "CMAKE_"))}


def build_copy(tree: Path, *cmake_args: str, target: Optional[str] = "customops") -> str:
    """Configures tree/build once (CPU only, no examples, nothing staged, and `cmake_args`) and builds `target` (None:
    everything) with the scripts' cache settings, as a fresh clone's build would; fails the test on an error and
    returns the build's output."""
    configure = ("" if (tree / "build" / "build.ninja").exists() else
                 f"cmake -S . -B build -G Ninja -DCUSTOMOPS_PYTHON={shlex.quote(sys.executable)} "
                 "-DCUSTOMOPS_WITH_CUDA=OFF -DCUSTOMOPS_BUILD_EXAMPLES=OFF -DCUSTOMOPS_STAGE_PYTHON=OFF "
                 + "".join(f"{shlex.quote(a)} " for a in cmake_args) + "&& ")
    build = "cmake --build build" + (f" --target {target}" if target else "")
    script = f"ROOT={shlex.quote(str(tree))}; source scripts/caches.sh && {configure}{build}"
    done = subprocess.run(["bash", "-c", script], cwd=tree, capture_output=True, text=True, env=build_env(),
                          timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout
