"""pip's build backend for customops (pyproject.toml): scikit-build-core's, plus the CUDA compiler as a build
requirement where the build needs one and the machine has none.

In an isolated build (`pip install .`), pip installs what get_requires_for_build_* returns into the build
environment, after torch: so a CUDA torch whose CUDA major no system toolkit matches gets nvidia-cuda-nvcc & co.
of its CUDA release there, and CMake finds them (cmake/python/customops_cuda_toolchain.py). Builds without
isolation install them into the environment at configure time instead.
"""

from __future__ import annotations

from scikit_build_core.build import *  # noqa: F401,F403  (the backend's hooks, re-exported)
from scikit_build_core.build import get_requires_for_build_editable as _requires_editable
from scikit_build_core.build import get_requires_for_build_wheel as _requires_wheel

import customops_cuda_toolchain as _toolchain


def _cuda_off(config_settings: dict | None) -> bool:
    settings = config_settings or {}
    define = str(settings.get("cmake.define.CUSTOMOPS_WITH_CUDA", "")).upper()
    args = " ".join(settings.get("cmake.args", []) if isinstance(settings.get("cmake.args"), list)
                    else [str(settings.get("cmake.args", ""))])
    return define == "OFF" or "CUSTOMOPS_WITH_CUDA=OFF" in args.upper()


def cuda_compiler_requirements(config_settings: dict | None = None) -> list[str]:
    """The compiler wheels this build needs from PyPI: none for a CPU-only torch or build, or where a compiler of
    torch's CUDA major is already here (a system toolkit or the wheels themselves)."""
    if _cuda_off(config_settings):
        return []
    try:
        cuda = _toolchain.torch_cuda()
    except _toolchain.ToolchainError:
        return []  # no torch yet: CMake says so
    if not cuda:
        return []
    try:
        _toolchain.find(cuda, install=False)
    except _toolchain.ToolchainError:
        return _toolchain.requirements(cuda)  # no compiler: what the wheels are for
    return []


def get_requires_for_build_wheel(config_settings=None):
    return [*_requires_wheel(config_settings), *cuda_compiler_requirements(config_settings)]


def get_requires_for_build_editable(config_settings=None):
    return [*_requires_editable(config_settings), *cuda_compiler_requirements(config_settings)]
