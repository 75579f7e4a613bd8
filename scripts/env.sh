# Sourced by the other scripts: sets ROOT, BUILD_DIR and PYTHON.
#
# Default: a project-local virtual environment, .venv, with requirements.txt (the newest
# supported torch) installed (network needed the first time), built into build/.
# CUSTOMOPS_TORCH=<version> (one of requirements/torch-<version>.txt, e.g. 2.11) uses that
# torch instead, in .venv-torch<version>, built into build-torch<version>/.
# On a machine whose python already has torch and no network (the GPU machine), set
# CUSTOMOPS_PYTHON=python3: no venv is made and nothing is installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQUIREMENTS="$ROOT/requirements.txt"
VENV_NAME=.venv
BUILD_NAME=build
if [[ -n "${CUSTOMOPS_TORCH:-}" && -z "${CUSTOMOPS_PYTHON:-}" ]]; then
  REQUIREMENTS="$ROOT/requirements/torch-$CUSTOMOPS_TORCH.txt"
  if [[ ! -f "$REQUIREMENTS" ]]; then
    echo "customops: CUSTOMOPS_TORCH=$CUSTOMOPS_TORCH is not a supported torch; supported:" \
      "$(cd "$ROOT/requirements" && ls torch-*.txt | sed 's/^torch-//; s/\.txt$//' | tr '\n' ' ')" >&2
    exit 2
  fi
  VENV_NAME=".venv-torch$CUSTOMOPS_TORCH"
  BUILD_NAME="build-torch$CUSTOMOPS_TORCH"
fi
BUILD_DIR="${CUSTOMOPS_BUILD_DIR:-$ROOT/$BUILD_NAME}"
export CUSTOMOPS_BUILD_DIR="$BUILD_DIR"
source "$ROOT/scripts/caches.sh"

# torch with its CUDA libraries takes about 6 GB in a venv, and pip needs about 4 GB more while it installs: fail
# before starting rather than with "No space left on device" half-way through. The wheel folder
# (scripts/caches.sh) keeps torch's wheels, about 4 GB more for each torch: where the disk has no room for them as
# well, the install goes on without it.
ensure_disk_space() {
  local need_gb=10 wheels_gb=5 free_gb
  free_gb=$(df -Pk "$ROOT" | awk 'NR == 2 { print int($4 / 1048576) }')
  if ((free_gb < need_gb)); then
    echo "customops: installing $REQUIREMENTS into $VENV needs about $need_gb GB of free disk;" \
      "$free_gb GB is free there. Free some space, or set CUSTOMOPS_PYTHON to a python that has torch." >&2
    exit 1
  fi
  if [[ -n "$CUSTOMOPS_WHEELS" ]]; then
    mkdir -p "$CUSTOMOPS_WHEELS"
    free_gb=$(df -Pk "$CUSTOMOPS_WHEELS" | awk 'NR == 2 { print int($4 / 1048576) }')
    if ((free_gb < need_gb + wheels_gb)); then
      echo "customops: $free_gb GB free for the wheel folder $CUSTOMOPS_WHEELS: installing without it" >&2
      CUSTOMOPS_WHEELS=""
    fi
  fi
}

# The scripts build to test: on a machine without a GPU, where the CUDA kernels are compiled but never run,
# for one architecture, Hopper's (9.0, with the sm_90a kernels), instead of every architecture a release targets
# (cmake/CustomopsCudaToolchain.cmake), and to PTX alone (CUSTOMOPS_CUDA_PTX_ONLY: ptxas, 10-20 s a source on 2
# cores, never runs); a machine with GPUs builds machine code for them. Every script decides this here, the same
# way, so that the demo's build is the one the tests use (test_scripts.py): a second set of flags would compile
# the whole tree again.
# (The scripts source this file again in processes they start: what it adds, it adds once.)
[[ " ${CUSTOMOPS_CMAKE_ARGS:-} " == *" -DCUSTOMOPS_DEFAULT_CUDA_ARCHS="* ]] \
  || export CUSTOMOPS_CMAKE_ARGS="-DCUSTOMOPS_DEFAULT_CUDA_ARCHS=9.0 ${CUSTOMOPS_CMAKE_ARGS:-}"
has_gpu() { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }
if [[ -z "${TORCH_CUDA_ARCH_LIST:-}" ]] && ! has_gpu; then
  export TORCH_CUDA_ARCH_LIST=9.0 CUSTOMOPS_CMAKE_ARGS="$CUSTOMOPS_CMAKE_ARGS -DCUSTOMOPS_CUDA_PTX_ONLY=ON"
fi
# CUSTOMOPS_SETTINGS_ONLY=1: print what decides the build and stop, before anything is installed or built (the
# check that the README's two commands build alike).
if [[ -n "${CUSTOMOPS_SETTINGS_ONLY:-}" ]]; then
  echo "customops settings: BUILD_DIR=$BUILD_DIR TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-}" \
    "CUSTOMOPS_CMAKE_ARGS=$(echo $CUSTOMOPS_CMAKE_ARGS) CUSTOMOPS_WHEEL_CUDA=${CUSTOMOPS_WHEEL_CUDA:-}"
  exit 0
fi

# An editable install of another checkout puts an import hook ahead of PYTHONPATH: the scripts would build
# this tree and test that one. Refuse instead.
refuse_other_checkout() {
  local found
  found="$("$PYTHON" -c 'import importlib.util as u, os; s = u.find_spec("customops")
print(os.path.dirname(os.path.realpath(s.origin)) if s and s.origin else "")' 2>/dev/null)"
  if [[ -n "$found" && "$found" != "$(realpath "$ROOT/python/customops")" ]]; then
    echo "customops: $PYTHON imports customops from $found, not from this checkout ($ROOT/python/customops):" \
      "the scripts would build this one and test that one. Run '$PYTHON -m pip uninstall customops'," \
      "or unset CUSTOMOPS_PYTHON to use the project's own environment." >&2
    exit 1
  fi
}

if [[ -n "${CUSTOMOPS_PYTHON:-}" ]]; then
  PYTHON="$(command -v "$CUSTOMOPS_PYTHON")"
  export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
  refuse_other_checkout
else
  bash "$ROOT/scripts/system_tools.sh"
  VENV="$ROOT/$VENV_NAME"
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  stamp="$VENV/.requirements.sha256"
  if ! sha256sum --status -c "$stamp" 2>/dev/null; then
    compgen -G "$VENV/lib/python*/site-packages/torch" >/dev/null || ensure_disk_space
    "$VENV/bin/python" -m pip install -q --no-cache-dir --upgrade pip
    pip_install "$VENV/bin/python" -r "$REQUIREMENTS"
    pip_install "$VENV/bin/python" --no-deps -r "$ROOT/requirements-headers.txt"
    sha256sum "$ROOT"/requirements*.txt "$ROOT"/requirements/*.txt >"$stamp"
  fi
  PYTHON="$VENV/bin/python"
  export PATH="$VENV/bin:$PATH"
fi
export CUSTOMOPS_PYTHON="$PYTHON"

# pytest's arguments that spread the tests over workers (pytest-xdist, in the project's environments): one per
# core on a machine without a GPU, since the tests are mostly single-threaded Python, subprocesses and compilers
# (a 2-core run of the whole suite kept 1.06 cores busy); one worker where a GPU is, whose tests share the device.
# A file's tests stay in one worker (--dist loadfile): its module fixtures (a wheel, a venv, a TF-Lite
# conversion) are made once; `pytest_workers load` deals out single tests instead, for a run of one file. At most
# 8: each worker holds its own torch and compiled graphs (1-2 GB). CUSTOMOPS_TEST_WORKERS=<n> overrides; without
# pytest-xdist, one process.
pytest_workers() {
  local workers="${CUSTOMOPS_TEST_WORKERS:-}"
  if [[ -z "$workers" ]]; then
    if has_gpu; then workers=1; else workers="$(nproc)"; fi
    ((workers <= 8)) || workers=8
  fi
  if ((workers > 1)) && "$PYTHON" -c 'import xdist' 2>/dev/null; then
    echo "-n $workers --dist ${1:-loadfile}"
  fi
}

# With CUSTOMOPS_JUNIT_DIR set (scripts/test.sh sets it), each pytest and ctest run writes a JUnit report there,
# named after the leg and the run, for scripts/test_summary.py.
pytest_junit() {
  [[ -z "${CUSTOMOPS_JUNIT_DIR:-}" ]] || echo "--junitxml=$CUSTOMOPS_JUNIT_DIR/$1-pytest-$RANDOM$RANDOM.xml"
}
ctest_junit() {
  [[ -z "${CUSTOMOPS_JUNIT_DIR:-}" ]] || echo "--output-junit $CUSTOMOPS_JUNIT_DIR/$1-ctest-$RANDOM$RANDOM.xml"
}
