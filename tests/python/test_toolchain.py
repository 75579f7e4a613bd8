"""Building on machines without a fitting CUDA toolkit: the compiler from PyPI, CPU-only builds with no compiler,
and the configure-time and script-time refusals (cmake/CustomopsCudaToolchain.cmake,
cmake/python/customops_cuda_toolchain.py, cmake/python/customops_build_backend.py, scripts/env.sh).

The system toolkit is hidden the way a test can: a PATH without nvcc, no CUDACXX/CUDA_HOME, and
CUSTOMOPS_CUDA_FROM_PYPI=ON, which keeps CMake from taking a system toolkit at its standard location.
The PyPI build compiles one real CUDA source of the library with the configured flags, not the whole library;
the CPU-only build with no compiler at all is also the sanitized leg's (scripts/sanitize.sh), which builds,
imports and runs every op.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "cmake" / "python"))

import customops_cuda_toolchain as toolchain  # noqa: E402

pytestmark = pytest.mark.torch_independent


def _without_cuda(tmp_path: Path, *, trap: bool = False) -> dict:
    """The environment with no CUDA compiler to find; with trap, an `nvcc` on PATH that records being run."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDACXX", "CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST")}
    dirs = [d for d in env.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvcc").exists()]
    if trap:
        bin_dir = tmp_path / "trap-bin"
        bin_dir.mkdir()
        (bin_dir / "nvcc").write_text(f"#!/bin/sh\necho ran >> {tmp_path / 'nvcc-ran'}\nexit 1\n")
        (bin_dir / "nvcc").chmod(0o755)
        dirs.insert(0, str(bin_dir))
    env["PATH"] = os.pathsep.join(dirs)
    return env


def _configure(build: Path, env: dict, *args: str, python: str = sys.executable):
    generator = ["-G", "Ninja"] if shutil.which("ninja", path=env["PATH"]) else []
    return subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build), *generator, f"-DCUSTOMOPS_PYTHON={python}",
         "-DCUSTOMOPS_BUILD_TESTS=OFF", "-DCUSTOMOPS_BUILD_EXAMPLES=OFF", "-DCUSTOMOPS_STAGE_PYTHON=OFF", *args],
        capture_output=True, text=True, env=env)


def _cache(build: Path) -> str:
    return (build / "CMakeCache.txt").read_text()


@pytest.mark.skipif(not torch.version.cuda, reason="the case is a CUDA torch")
def test_cpu_only_build_of_a_cuda_torch_needs_no_cuda_compiler(tmp_path):
    done = _configure(tmp_path / "build", _without_cuda(tmp_path, trap=True), "-DCUSTOMOPS_WITH_CUDA=OFF")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (tmp_path / "nvcc-ran").exists(), "a CPU-only configure ran nvcc"
    assert "CMAKE_CUDA_COMPILER:" not in _cache(tmp_path / "build")
    assert "customops: CUDA kernels OFF" in done.stdout
    assert "no CUDA compiler; linking torch's CUDA runtime" in done.stdout


def test_a_bare_interpreter_name_survives_the_next_configure(tmp_path):
    # A build configured with -DCUSTOMOPS_PYTHON=python3 configures again when a source is added (the globs'
    # check): the second run must still find the interpreter.
    env = _without_cuda(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchpython").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "torchpython").chmod(0o755)
    env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
    build = tmp_path / "build"
    for _ in range(2):
        done = _configure(build, env, "-DCUSTOMOPS_WITH_CUDA=OFF", python="torchpython")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"CUSTOMOPS_PYTHON:FILEPATH={bin_dir / 'torchpython'}" in _cache(build)


def test_torch_outside_the_supported_range_is_refused(tmp_path):
    fake = tmp_path / "site" / "torch"
    (fake / "utils").mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '2.10.0'\nfrom . import utils, version\n")
    (fake / "version.py").write_text("cuda = None\n")
    (fake / "utils" / "__init__.py").write_text("cmake_prefix_path = '/nonexistent'\n")
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'site'} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    done = _configure(tmp_path / "build", _without_cuda(tmp_path), python=str(python))
    assert done.returncode != 0
    message = " ".join(done.stderr.split())
    assert "torch 2.10.0" in message and "outside the supported releases" in message, message
    assert "pip install 'torch>=2.11.0,<2.16'" in message, message


def _fake_nvcc(directory: Path, release: str) -> Path:
    directory.mkdir(parents=True)
    nvcc = directory / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(0o755)
    return nvcc


def test_finder_takes_a_system_compiler_of_torchs_major_only(tmp_path, monkeypatch):
    monkeypatch.setattr(toolchain, "SYSTEM_LOCATIONS", ())
    monkeypatch.setattr(toolchain, "wheel_roots", lambda cuda: [])
    old = _fake_nvcc(tmp_path / "cuda-12.8" / "bin", "12.8")
    with pytest.raises(toolchain.ToolchainError) as refused:
        toolchain.find("13.2", install=False, environ={"PATH": str(old.parent)})
    assert f"{old} is CUDA 12.8" in str(refused.value)
    assert "pip install nvidia-cuda-nvcc==13.2.* nvidia-cuda-crt==13.2.* nvidia-nvvm==13.2.*" in str(refused.value)
    assert "CUSTOMOPS_WITH_CUDA=OFF" in str(refused.value)
    fits = _fake_nvcc(tmp_path / "cuda-13.0" / "bin", "13.0")
    environ = {"PATH": str(old.parent), "CUDA_HOME": str(fits.parent.parent)}
    assert toolchain.find("13.2", install=False, environ=environ) == (str(fits), "system", "13.0")
    # CUSTOMOPS_CUDA_FROM_PYPI=ON: the system one is passed over.
    with pytest.raises(toolchain.ToolchainError):
        toolchain.find("13.2", pypi_only=True, install=False, environ=environ)


def test_build_backend_asks_for_the_compiler_only_where_none_fits(monkeypatch):
    import customops_build_backend as backend

    monkeypatch.setattr(toolchain, "torch_cuda", lambda: "13.2")
    monkeypatch.setattr(toolchain, "wheel_roots", lambda cuda: [])

    def missing(*a, **k):
        raise toolchain.ToolchainError("none")

    monkeypatch.setattr(toolchain, "find", missing)
    wanted = ["nvidia-cuda-nvcc==13.2.*", "nvidia-cuda-crt==13.2.*", "nvidia-nvvm==13.2.*", "nvidia-cuda-cccl==13.2.*"]
    assert backend.cuda_compiler_requirements() == wanted
    assert backend.cuda_compiler_requirements({"cmake.define.CUSTOMOPS_WITH_CUDA": "OFF"}) == []
    assert backend.cuda_compiler_requirements({"cmake.args": ["-DCUSTOMOPS_WITH_CUDA=OFF"]}) == []
    monkeypatch.setattr(toolchain, "find", lambda *a, **k: ("/usr/local/cuda/bin/nvcc", "system", "13.0"))
    assert backend.cuda_compiler_requirements() == []
    monkeypatch.setattr(toolchain, "torch_cuda", lambda: "")
    monkeypatch.setattr(toolchain, "find", missing)
    assert backend.cuda_compiler_requirements() == []


def test_finder_reads_torchs_cuda_without_importing_it():
    assert toolchain.torch_cuda() == (torch.version.cuda or "")


def test_scripts_refuse_a_python_that_imports_another_checkout(tmp_path):
    other = tmp_path / "other" / "python" / "customops"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    # What an editable install does: an import hook, installed at start-up, ahead of PYTHONPATH.
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import importlib.machinery, sys\n"
        "class Finder:\n"
        "    @staticmethod\n"
        "    def find_spec(name, path=None, target=None):\n"
        "        if name == 'customops':\n"
        f"            return importlib.machinery.PathFinder.find_spec(name, [{str(other.parent)!r}])\n"
        "sys.meta_path.insert(0, Finder)\n")
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH=\"$PYTHONPATH:{hook}\" exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    env = {**os.environ, "CUSTOMOPS_PYTHON": str(python)}
    done = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts' / 'env.sh'} && echo sourced"],
                          capture_output=True, text=True, env=env)
    assert done.returncode != 0 and "sourced" not in done.stdout
    assert f"imports customops from {other.resolve()}, not from this checkout" in done.stderr, done.stderr
    # The same Python without the hook is accepted.
    env["CUSTOMOPS_PYTHON"] = sys.executable
    done = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts' / 'env.sh'} && echo sourced"],
                          capture_output=True, text=True, env=env)
    assert "sourced" in done.stdout, done.stderr


def test_build_info_says_what_the_library_holds():
    import customops

    info = customops.build_info()
    assert info["torch_version"] == torch.__version__
    if info["cuda"]:
        # Machine code, or PTX alone where the build only checks that the CUDA sources compile (scripts/test.sh).
        assert info["cuda_sass"] or info["cuda_ptx"], info
        assert info["cuda_version"] and info["cuda_compiler"] in ("system", "pypi", "given")
    else:
        assert info["cuda_sass"] == [] and info["cuda_ptx"] == [] and info["cuda_version"] == ""


@pytest.mark.skipif(not torch.version.cuda, reason="the PyPI compiler builds against a CUDA torch")
def test_pypi_compiler_builds_a_cuda_source_with_no_system_toolkit(tmp_path):
    if not os.environ.get("CUSTOMOPS_TOOLCHAIN_TEST"):
        # It installs nvidia-cuda-nvcc & co. into this environment (network); scripts/test.sh asks for it in the
        # project's own environment, where a failure is a failure.
        pytest.skip("set CUSTOMOPS_TOOLCHAIN_TEST=1 to install the PyPI CUDA compiler into this environment")
    build = tmp_path / "build"
    env = _without_cuda(tmp_path, trap=True)
    env["TORCH_CUDA_ARCH_LIST"] = "9.0"
    # Without precompiled headers the one host source compiles alone, not after the torch headers' precompilation.
    done = _configure(build, env, "-DCUSTOMOPS_CUDA_FROM_PYPI=ON", "-DCUSTOMOPS_WITH_CUTLASS=OFF",
                      "-DCUSTOMOPS_PRECOMPILE_HEADERS=OFF")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (tmp_path / "nvcc-ran").exists(), "the configure ran an nvcc from PATH"
    assert "customops: CUDA kernels ON" in done.stdout
    info = json.loads((build / "build_info.json").read_text())
    assert info["cuda_compiler"] == "pypi" and info["cuda_version"].startswith(torch.version.cuda + ".")
    assert info["cuda_sass"] == [90] and info["cuda_ptx"] == []
    # A kernel source (nvcc) and a host source of the CUDA build (the C++ compiler, with the toolkit's headers).
    objects = ["kernels/cuda/common/memory_format.cu.o", "kernels/cuda/common/device_guard.cpp.o"]
    ninja = (build / "build.ninja").exists()
    targets = [f"CMakeFiles/customops.dir/{o}" if ninja else o for o in objects]
    done = subprocess.run(["cmake", "--build", str(build), "--target", *targets], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for o in objects:
        assert list(build.rglob(o.rsplit("/", 1)[1])), f"{o} was not compiled"


@pytest.mark.skipif(not torch.version.cuda, reason="the architectures of a CUDA build")
def test_build_without_a_gpu_targets_the_release_architectures(tmp_path):
    # scripts/test.sh compiles one architecture per leg where no GPU is; this is the choice every other build makes.
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # as on a machine without a GPU
    done = _configure(tmp_path / "build", env, "-DCUSTOMOPS_WITH_CUTLASS=OFF")
    if done.returncode != 0 and "CUDA compiler" in done.stderr:
        pytest.skip("no CUDA compiler to configure with: " + done.stderr[-300:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cache = _cache(tmp_path / "build")
    listed = re.search(r"CUSTOMOPS_DEFAULT_CUDA_ARCHS:STRING=(.*)", cache).group(1).split(";")
    assert listed[0] == "8.0" and "9.0" in listed, listed
    chosen = re.search(r"no GPU here; building for (\S+)", done.stdout)
    assert chosen, done.stdout[-3000:]
    archs = chosen.group(1).split(";")
    # Every listed architecture the compiler knows, the newest with PTX for GPUs to come.
    assert archs[0] == "8.0" and "9.0" in archs and archs[-1].endswith("+PTX"), archs
    assert set(a.removesuffix("+PTX") for a in archs) <= set(listed), archs
    info = json.loads((tmp_path / "build" / "build_info.json").read_text())
    assert 80 in info["cuda_sass"] and 90 in info["cuda_sass"] and info["cuda_ptx"], info
