"""Finds and loads libcustomops.so, which registers the torch.ops.customops operators."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch



def _package_dirs() -> list[Path]:
    """The package's directories: one for a plain or pip install; for a pip editable install
    (scikit-build-core) the source tree first, then where CMake installed the built files."""
    package = sys.modules[__package__]  # being imported: its __path__ is already set
    return [Path(p).resolve() for p in package.__path__]


def _find(relative: str) -> Path | None:
    return next((d / relative for d in _package_dirs() if (d / relative).exists()), None)


def library_path() -> str:
    """Absolute path of the libcustomops.so this package loads.

    ``$CUSTOMOPS_LIBRARY`` overrides the package's own copy (``customops/lib/``: installed
    there by pip, or staged there by scripts/build.sh). C++ programs link the same
    library through the CMake package.
    """
    override = os.environ.get("CUSTOMOPS_LIBRARY")
    if override:
        return str(Path(override).absolute())
    return str(_find("lib/libcustomops.so") or _package_dirs()[0] / "lib" / "libcustomops.so")


def cmake_prefix_path() -> str | None:
    """Where ``find_package(customops)`` finds the installed CMake package, as
    ``torch.utils.cmake_prefix_path`` is for Torch; None without one. A pip install has one;
    a plain build installs it with ``cmake --install <build dir> --prefix <dir>``."""
    config = _find("share/cmake/customops/customopsConfig.cmake")
    return str(config.parents[1]) if config else None


def runner_path(name: str) -> str:
    """Path of an installed C++ runner: ``"torchscript"`` (customops_torchscript) or ``"aoti"``
    (customops_aoti). A pip install puts them in ``customops/bin/``; a plain build in
    ``<build dir>/examples/``, which ``$CUSTOMOPS_BUILD_DIR`` names."""
    if name not in ("torchscript", "aoti"):
        raise ValueError(f"customops: no runner {name!r}; expected 'torchscript' or 'aoti'")
    candidates = [d / "bin" / f"customops_{name}" for d in _package_dirs()]
    if os.environ.get("CUSTOMOPS_BUILD_DIR"):
        candidates.insert(0, Path(os.environ["CUSTOMOPS_BUILD_DIR"]) / "examples" / f"customops_{name}")
    found = next((c for c in candidates if c.exists()), None)
    if found is None:
        raise FileNotFoundError(f"customops: customops_{name} not found in {', '.join(map(str, candidates))}; "
                                "install the package with pip, or build it and set CUSTOMOPS_BUILD_DIR")
    return str(found)


def build_info() -> dict:
    """What the staged library was built with: torch version, CUDA on/off, CPU builds."""
    info = Path(library_path()).parent / "build_info.json"
    return json.loads(info.read_text()) if info.exists() else {}


def _load() -> None:
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(
            f"customops: {path} does not exist. Install the package (pip install --no-build-isolation .), "
            "build it (scripts/build.sh), or point CUSTOMOPS_LIBRARY at a built libcustomops.so."
        )
    built_for = build_info().get("torch_version")
    if built_for is not None and built_for != torch.__version__:
        raise ImportError(
            f"customops: {path} was built against torch {built_for}, but this interpreter "
            f"has torch {torch.__version__}; rebuild it (pip install, or scripts/build.sh)."
        )
    torch.ops.load_library(path)


_load()
