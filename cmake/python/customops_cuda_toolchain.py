"""The CUDA compiler a build of customops uses: one that matches the CUDA of the torch it builds against.

A system toolkit (CUDACXX, nvcc on PATH, CUDA_HOME / CUDA_PATH, /usr/local/cuda) is used when its major
version is torch's. Otherwise the compiler comes from PyPI, as torch's CUDA libraries do: nvidia-cuda-nvcc,
nvidia-cuda-crt and nvidia-nvvm of torch's CUDA release, installed into the environment
whose torch is built against (they unpack into the same site-packages/nvidia/cu<major> tree as the runtime).

Run by CMake at configure time (cmake/CustomopsCudaToolchain.cmake) and by the build backend
(customops_build_backend.py) with the Python whose torch is built against; it needs only the standard library
and torch's metadata, never imports torch's C++ side.

    python customops_cuda_toolchain.py find [--pypi-only] [--no-install]
        prints "<nvcc>;<source>;<version>" (source: system or pypi); exit 1 with one line on stderr otherwise.
    python customops_cuda_toolchain.py requirements
        prints the PyPI requirements that provide the compiler for this torch, one per line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

# The wheels that make a working nvcc beside torch's nvidia-cuda-runtime (headers, cudart) and nvidia-cuda-cccl.
COMPILER_WHEELS = ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm")
SYSTEM_LOCATIONS = ("/usr/local/cuda",)


class ToolchainError(RuntimeError):
    pass


def torch_cuda() -> str:
    """torch.version.cuda ("13.2"), or "" for a CPU-only torch, read without importing torch."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError("torch is not installed in " + sys.executable)
    text = (Path(spec.submodule_search_locations[0]) / "version.py").read_text()
    match = re.search(r"^cuda\s*(?::\s*[^=]+)?=\s*['\"]([0-9.]+)['\"]", text, re.M)
    return match.group(1) if match else ""


def nvcc_version(nvcc: str | os.PathLike) -> str:
    """"13.2" for an nvcc that runs, "" otherwise."""
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else ""


def system_candidates(environ=os.environ) -> list[str]:
    found = []
    if environ.get("CUDACXX"):
        found.append(environ["CUDACXX"])
    on_path = shutil.which("nvcc", path=environ.get("PATH", ""))
    if on_path:
        found.append(on_path)
    for root in (environ.get("CUDA_HOME"), environ.get("CUDA_PATH"), *SYSTEM_LOCATIONS):
        if root:
            found.append(os.path.join(root, "bin", "nvcc"))
    unique = []
    for nvcc in found:
        if os.path.isfile(nvcc) and os.path.realpath(nvcc) not in map(os.path.realpath, unique):
            unique.append(nvcc)
    # An nvcc inside a toolkit's layout before a wrapper script elsewhere (/usr/local/bin/nvcc): torch's CMake
    # needs the toolkit folder, which it derives from the compiler's path.
    return sorted(unique, key=lambda nvcc: not _in_toolkit(nvcc))


def _in_toolkit(nvcc: str) -> bool:
    return os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include", "cuda_runtime.h"))


def wheel_roots(cuda: str) -> list[Path]:
    """Every site-packages/nvidia/cu<major> this Python sees: the environment's, and under pip's isolated
    build the build environment's, where the PyPI CUDA wheels unpack."""
    major = cuda.split(".")[0]
    dirs = [*sys.path, sysconfig.get_paths()["purelib"]]
    return [Path(d) / "nvidia" / f"cu{major}" for d in dirs if d and (Path(d) / "nvidia" / f"cu{major}").is_dir()]


def requirements(cuda: str) -> list[str]:
    """Pins for the compiler wheels: the newest patch release of torch's CUDA minor (the compiler wheels' patch
    numbers do not follow nvidia-cuda-runtime's). CUDA's C++ library headers (nvidia-cuda-cccl) come too where
    torch's wheels did not bring them."""
    wheels = list(COMPILER_WHEELS)
    if not any((root / "include" / "cccl").is_dir() for root in wheel_roots(cuda)):
        wheels.append("nvidia-cuda-cccl")
    return [f"{name}=={cuda}.*" for name in wheels]


def _wheel_nvcc(cuda: str) -> tuple[str, str]:
    for root in wheel_roots(cuda):
        nvcc = root / "bin" / "nvcc"
        # Without CUDA's C++ library headers (nvcc.profile puts include/cccl on the path) the set is incomplete.
        found = nvcc_version(nvcc) if nvcc.is_file() and (root / "include" / "cccl").is_dir() else ""
        if found:
            return str(nvcc), found
    return "", ""


def find(cuda: str, *, pypi_only: bool = False, install: bool = True, environ=os.environ) -> tuple[str, str, str]:
    """(nvcc, "system" | "pypi", version) for a compiler whose major version is torch's CUDA's."""
    major = cuda.split(".")[0]
    rejected = []
    if not pypi_only:
        for nvcc in system_candidates(environ):
            found = nvcc_version(nvcc)
            if found.split(".")[0] == major:
                return nvcc, "system", found
            rejected.append(f"{nvcc} is CUDA {found or '(does not run)'}")
    nvcc, found = _wheel_nvcc(cuda)
    if not found and install:
        reqs = requirements(cuda)
        why = "; ".join(rejected) or "none on PATH or in " + ", ".join(SYSTEM_LOCATIONS)
        print(f"customops: no CUDA {major}.x compiler found ({why}); installing {' '.join(reqs)} from PyPI",
              file=sys.stderr)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *reqs])
        if done.returncode != 0:
            raise ToolchainError(
                f"could not install the CUDA {cuda} compiler from PyPI ({' '.join(reqs)}); install it with pip, "
                "point CMAKE_CUDA_COMPILER at a CUDA " + major + ".x nvcc, or build CPU-only (CUSTOMOPS_WITH_CUDA=OFF)")
        nvcc, found = _wheel_nvcc(cuda)
    if found.split(".")[0] == major:
        return nvcc, "pypi", found
    raise ToolchainError(
        f"torch is a CUDA {cuda} build and no CUDA {major}.x compiler was found"
        + (f" ({'; '.join(rejected)})" if rejected else "")
        + f"; pip install {' '.join(requirements(cuda))}, point CMAKE_CUDA_COMPILER at a CUDA {major}.x nvcc, "
        "or build CPU-only (CUSTOMOPS_WITH_CUDA=OFF)")


def main(argv: list[str]) -> int:
    try:
        cuda = torch_cuda()
        if not cuda:
            raise ToolchainError("torch in " + sys.executable + " has no CUDA")
        if argv[:1] == ["requirements"]:
            print("\n".join(requirements(cuda)))
        elif argv[:1] == ["find"]:
            print(";".join(find(cuda, pypi_only="--pypi-only" in argv, install="--no-install" not in argv)))
        else:
            raise ToolchainError("usage: customops_cuda_toolchain.py find [--pypi-only] [--no-install] | requirements")
    except ToolchainError as e:
        print(f"customops: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
