"""Finds and loads libcustomops.so, which registers the torch.ops.customops operators."""

from __future__ import annotations

import filecmp
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
    stale = _older_than_build(Path(path), build_info())
    if stale is not None and _source_checkout() is not None:
        # A build that no install followed (`cmake --build` in an editable install's build folder): loading would
        # test the code of before the rebuild, silently.
        raise ImportError(
            f"customops: {path} is older than the library built in its build folder, {stale}: Python would run "
            f"the code of before that build. Install what was built: scripts/build.sh in {_source_checkout()} "
            f"(it rebuilds through pip's editable install, into the same build folder), or pip install "
            f"--no-build-isolation --no-deps -e {_source_checkout()} -C build-dir={stale.parent}; or set "
            f"CUSTOMOPS_LIBRARY={stale} to load the build folder's.")
    torch.ops.load_library(path)


def _older_than_build(path: Path, info: dict) -> Path | None:
    """The library of the build folder `path` was built in (build_info.json's build_dir) where it is newer than
    `path` and differs from it: what a rebuild left there without installing it; else None."""
    built = Path(info.get("build_dir") or "") / "libcustomops.so"
    if not info.get("build_dir") or not built.is_file() or built.resolve() == path.resolve():
        return None
    if built.stat().st_mtime <= path.stat().st_mtime or filecmp.cmp(built, path, shallow=False):
        return None
    return built


def _source_checkout() -> Path | None:
    """The source checkout this package is used from (an editable install, or PYTHONPATH=python), or None."""
    source = Path(__file__).resolve().parents[2]
    return source if (source / "pyproject.toml").exists() and (source / "scripts" / "build.sh").exists() else None


def _rebuild_command() -> str:
    """How to rebuild against the torch of this interpreter, for the error message above."""
    source = _source_checkout()
    if source is not None:
        # A source checkout: the package is used from the tree, built by the scripts or pip -e.
        return (f"pip install --no-build-isolation --no-deps -e {source}  "
                f"(or scripts/build.sh in {source})")
    return "pip install --no-build-isolation --no-deps --force-reinstall <customops source directory>"


_load()
