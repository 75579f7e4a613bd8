"""pip: the wheel pyproject.toml builds, installed into a fresh virtual environment.

Builds the wheel once per session (`pip wheel --no-build-isolation`, the whole CMake
project), installs it with --no-deps into a new venv that sees this environment's torch
(no 3 GB download), runs an op there from a neutral directory, runs an installed C++
runner, and builds the find_package consumer (tests/cpp/consumer) against the installed
package. The wheel compiles the whole project again, CUDA kernels included where nvcc is found
(7 min 10 s on a 2-core machine shared with other builds; CUSTOMOPS_WHEEL_CUDA=OFF leaves them out), unless
CUSTOMOPS_WHEEL_BUILD_DIR names an editable install's build directory to reuse (scripts/test.sh does).
CUSTOMOPS_TEST_WHEEL=path tests a wheel built beforehand instead. Deselect with `-m "not pip"`.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.pip, pytest.mark.torch_independent]


def _require_build_backend():
    try:
        import scikit_build_core  # noqa: F401
    except ImportError:
        # The GPU machine's python3 has no network to install it. Where the scripts made the venv
        # (requirements.txt has it), a missing backend is a failure, not a skip.
        if os.environ.get("CUSTOMOPS_REQUIRE_PIP_TEST"):
            pytest.fail("scikit-build-core is missing from the environment (requirements.txt)")
        pytest.skip("scikit-build-core is not installed (pip install -r requirements.txt)")


def _run(cmd, **kw):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def _clean_env() -> dict:
    """The environment without what points at the source tree's package or build."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUSTOMOPS_LIBRARY", "CUSTOMOPS_BUILD_DIR")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if os.environ.get("CUSTOMOPS_TEST_WHEEL"):  # a wheel built beforehand, e.g. with CUDA kernels
        return Path(os.environ["CUSTOMOPS_TEST_WHEEL"])
    _require_build_backend()
    tmp = tmp_path_factory.mktemp("pip")
    cuda = os.environ.get("CUSTOMOPS_WHEEL_CUDA", "AUTO")
    # CUSTOMOPS_WHEEL_BUILD_DIR: the build directory of an editable install of this source tree into this
    # environment (scripts/test.sh passes its own), configured as that install configured it, so that the
    # wheel reuses its objects instead of compiling the whole project a second time.
    reuse = os.environ.get("CUSTOMOPS_WHEEL_BUILD_DIR")
    build_args = (["-C", f"build-dir={reuse}", "-C", "cmake.define.CUSTOMOPS_BUILD_TESTS=ON",
                   "-C", f"cmake.define.CUSTOMOPS_PYTHON={sys.executable}"] if reuse
                  else ["-C", f"build-dir={tmp / 'build'}"])
    start = time.perf_counter()
    _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", tmp / "dist", *build_args,
          "-C", f"cmake.define.CUSTOMOPS_WITH_CUDA={cuda}", ROOT], timeout=3600)
    print(f"\nwheel built in {time.perf_counter() - start:.0f} s (CUSTOMOPS_WITH_CUDA={cuda})", file=sys.stderr)
    (path,) = (tmp / "dist").glob("customops-*.whl")
    return path


def _work_dir(config, tmp_path_factory, name: str) -> Path:
    """A fresh folder for the venv or the consumer's build. Where the scripts run the tests (they name their
    build directory), one inside it: the same path relative to the checkout in every clone, so that the compiler
    cache (scripts/caches.sh hashes paths under the checkout relative to it) serves the consumer's build again.
    Only while this file's tests run in one process: pytest-xdist's default distribution would give two workers
    the same folder."""
    build = os.environ.get("CUSTOMOPS_WHEEL_BUILD_DIR")
    if not build or config.getoption("dist", "no") not in ("no", "loadfile"):
        return tmp_path_factory.mktemp(name)
    folder = Path(build) / "pip-install-test" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory, pytestconfig):
    env_dir = _work_dir(pytestconfig, tmp_path_factory, "venv")
    _run([sys.executable, "-m", "venv", "--without-pip", env_dir])
    python = env_dir / "bin" / "python"
    # This environment's site-packages and torch's, after the venv's own: a .pth line only adds the
    # directory, so editable or path hooks installed there (a customops in development) are not run.
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    parents = dict.fromkeys([sysconfig.get_paths()["purelib"], str(Path(torch.__file__).parents[1])])
    (site / "parent_env.pth").write_text("".join(f"{p}\n" for p in parents))
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel])
    return python


def test_wheel_holds_library_headers_runners_and_cmake_package(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = z.read(meta).decode()
    for path in ["customops/__init__.py", "customops/aoti.py", "customops/lib/libcustomops.so",
                 "customops/lib/build_info.json", "customops/include/customops/ops.h",
                 "customops/bin/customops_torchscript", "customops/bin/customops_aoti",
                 "customops/share/cmake/customops/customopsConfig.cmake"]:
        assert path in names, f"{path} is not in {wheel.name}"
    assert f"Requires-Dist: torch=={version('torch')}" in metadata.splitlines()


def test_installed_package_runs_an_op(venv, tmp_path):
    code = ("import json, torch, customops\n"
            "x = torch.linspace(-4, 4, 9, dtype=torch.float64)\n"
            "err = (customops.quick_gelu(x) - x * torch.sigmoid(1.702 * x)).abs().max().item()\n"
            "print(json.dumps({'file': customops.__file__, 'lib': customops.library_path(), 'err': err,\n"
            "                  'prefix': customops.cmake_prefix_path, 'aoti': customops.runner_path('aoti')}))\n")
    out = json.loads(_run([venv, "-c", code], cwd=tmp_path, env=_clean_env()).stdout.strip().splitlines()[-1])
    env_dir = str(venv.parent.parent)
    for key in ("file", "lib", "prefix", "aoti"):
        assert out[key].startswith(env_dir), f"{key}: {out[key]} is not inside the new environment {env_dir}"
    assert out["err"] < 1e-12


def _installed(venv) -> Path:
    platlib = _run([venv, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                   env=_clean_env()).stdout.strip()
    return Path(platlib) / "customops"


def test_installed_library_and_runners_find_their_libraries(venv):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    package = _installed(venv)
    for binary in [package / "lib" / "libcustomops.so", package / "bin" / "customops_aoti",
                   package / "bin" / "customops_torchscript"]:
        ldd = _run(["ldd", binary], env=env).stdout
        assert "not found" not in ldd, f"{binary}:\n{ldd}"


def test_installed_torchscript_runner_runs_a_model(venv, tmp_path):
    import customops

    module = customops.QuickGELU()
    module.example_inputs = [torch.randn(3, 5)]  # what the runner calls forward with
    torch.jit.script(module).save(str(tmp_path / "model.pt"))
    done = _run([_installed(venv) / "bin" / "customops_torchscript", tmp_path / "model.pt", "--repeats", "1"])
    assert json.loads(done.stdout.strip().splitlines()[-1])["shape"] == [3, 5]


def test_find_package_consumer_builds_against_the_installed_package(venv, tmp_path, tmp_path_factory, pytestconfig):
    prefix = _run([venv, "-c", "import customops, torch.utils; "
                               "print(customops.cmake_prefix_path + ';' + torch.utils.cmake_prefix_path)"],
                  cwd=tmp_path, env=_clean_env()).stdout.strip()
    args = [f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"]
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    # A compiler that runs, if any: without one, the package gives torch's CMake the CUDA runtime of its wheels.
    runs = Path(nvcc).exists() and subprocess.run([nvcc, "--version"], capture_output=True).returncode == 0
    if torch.version.cuda and runs:
        args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    build = _work_dir(pytestconfig, tmp_path_factory, "consumer")
    _run(["cmake", "-S", ROOT / "tests" / "cpp" / "consumer", "-B", build, *args])
    _run(["cmake", "--build", build], timeout=900)
    assert "max error" in _run([build / "consumer"]).stdout
