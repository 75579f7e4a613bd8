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
    # An editable install lists the source tree first and the environment's installed files after it:
    # what pip built for this environment wins over a copy scripts/build.sh staged in the source tree.
    return next((d / relative for d in reversed(_package_dirs()) if (d / relative).exists()), None)


def registered_ops() -> list[str]:
    """Every registered customops operator's name (no namespace), sorted, each once: an out variant
    (``<op>.out``, what ExecuTorch's programs call) is an overload of its op, not an op of its own."""
    names = {n.split("::", 1)[1].split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
             if n.startswith("customops::")}
    return sorted(names)


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
    """Path of an installed C++ runner: ``"torchscript"`` (customops_torchscript), ``"aoti"``
    (customops_aoti) or ``"executorch_runner"`` (customops_executorch_runner, built where the build's
    Python had executorch). A pip install puts them in ``customops/bin/``; a plain build in
    ``<build dir>/examples/``, which ``$CUSTOMOPS_BUILD_DIR`` names."""
    if name not in ("torchscript", "aoti", "executorch_runner"):
        raise ValueError(f"customops: no runner {name!r}; expected 'torchscript', 'aoti' or 'executorch_runner'")
    candidates = [d / "bin" / f"customops_{name}" for d in reversed(_package_dirs())]
    if os.environ.get("CUSTOMOPS_BUILD_DIR"):
        candidates.insert(0, Path(os.environ["CUSTOMOPS_BUILD_DIR"]) / "examples" / f"customops_{name}")
    found = next((c for c in candidates if c.exists()), None)
    if found is None:
        raise FileNotFoundError(f"customops: customops_{name} not found in {', '.join(map(str, candidates))}; "
                                "install the package with pip, or build it and set CUSTOMOPS_BUILD_DIR")
    return str(found)


def build_info() -> dict:
    """What the library was built with: torch version, CPU kernel builds, and for CUDA the compiler's version and
    origin (system, pypi or given) and the GPU architectures it holds machine code (cuda_sass, e.g. [80, 90]) and
    PTX (cuda_ptx) for; a GPU outside them is refused with a message naming the rebuild."""
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
        # Checked before loading: libcustomops.so links one libtorch's C++ ABI, and under another
        # torch the load would fail with an undefined symbol, or worse, load and crash later.
        raise ImportError(
            f"customops: {path} was built against torch {built_for}, but this Python has torch "
            f"{torch.__version__}. A compiled customops works only with the torch it was built against. "
            f"Rebuild it for this torch: {_rebuild_command()} (or install torch=={built_for.split('+')[0]})."
        )
    torch.ops.load_library(path)


def _rebuild_command() -> str:
    """How to rebuild against the torch of this interpreter, for the error message above."""
    source = Path(__file__).resolve().parents[2]
    if (source / "pyproject.toml").exists() and (source / "scripts" / "build.sh").exists():
        # A source checkout: the package is used from the tree, built by the scripts or pip -e.
        return (f"pip install --no-build-isolation --no-deps -e {source}  "
                f"(or scripts/build.sh in {source})")
    return "pip install --no-build-isolation --no-deps --force-reinstall <customops source directory>"


_load()
