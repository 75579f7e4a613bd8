#!/usr/bin/env bash
# Builds and installs (pip, see install.sh), then runs every test: GoogleTest (through
# ctest) and pytest. CUDA tests run when a GPU is present and skip otherwise. Arguments go to pytest.
#
# In the project's virtual environments (no CUSTOMOPS_PYTHON) it tests both ends of the supported
# torch range, as CI does: the newest (.venv, build/), then the oldest (.venv-torch<version>,
# build-torch<version>/, without the sm_90a kernels), then the CPU kernels under AddressSanitizer and
# UndefinedBehaviorSanitizer (scripts/sanitize.sh, build-asan/). CUSTOMOPS_TORCH=<version> tests that torch alone.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# ahead <what> <command...>: runs the command in the background at the lowest priority, its output kept aside,
# in a process group of its own (job control, set -m), which is stopped if this script ends first (an interrupt,
# a failure); not in a session of its own (setsid): where the kernel groups processes by session (autogroup), a
# new session shares the cores evenly with this one whatever its nice level, and slowed this leg's build by a third.
# wait_ahead waits for it and, if it failed, shows the end of that output (the leg that needs it runs it again).
ahead_pid=""
trap '[[ -z "$ahead_pid" ]] || kill -- "-$ahead_pid" 2>/dev/null || true' EXIT
ahead() {
  ahead_what="$1"
  shift
  ahead_log="$(mktemp)"
  ahead_start=$SECONDS
  set -m
  nice -n 19 "$@" >"$ahead_log" 2>&1 &
  ahead_pid=$!
  set +m
}
wait_ahead() {
  local start=$SECONDS
  if ! wait "$ahead_pid"; then
    echo "customops: $ahead_what, made ahead, failed; its last lines:" >&2
    tail -n 30 "$ahead_log" >&2
  fi
  ahead_pid=""
  echo "customops: waited $((SECONDS - start)) s for $ahead_what (made ahead in $((SECONDS - ahead_start)) s)" >&2
  rm -f "$ahead_log"
}

# --full: the heavy checks whole (the model zoo's every model, the fuzzer's every call, the example scripts' every
# network), as a developer runs them before landing a change to what they cover; without it they take compact
# samples that still cover every op and every runtime (CUSTOMOPS_FULL_TESTS, tests/python/conftest.py).
args=()
for arg in "$@"; do
  if [[ "$arg" == --full ]]; then export CUSTOMOPS_FULL_TESTS=1; else args+=("$arg"); fi
done
set -- ${args[@]+"${args[@]}"}

if [[ -z "${CUSTOMOPS_PYTHON:-}${CUSTOMOPS_TORCH:-}${CUSTOMOPS_TEST_ONE_TORCH:-}" ]]; then
  oldest="$(cd "$ROOT/requirements" && ls torch-*.txt | sed 's/^torch-//; s/\.txt$//' | sort -V | head -1)"
  # Where there is no GPU, nothing compiled for one runs: the newest torch's build (the demo's, scripts/env.sh)
  # compiles the CUDA sources to PTX for 9.0, and the oldest torch's is CPU-only: compiling the CUDA sources a
  # second time took a third of a 2-core CI run's 90 minutes' margin, and tests nothing more there than that they
  # compile against the oldest torch's headers, which every build on the GPU machine (torch 2.11) does. With a GPU
  # both builds have CUDA kernels.
  oldest_cpu_only=() oldest_cmake=""
  if [[ -z "${TORCH_CUDA_ARCH_LIST:-}" ]] && ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
    oldest_cpu_only=("CUSTOMOPS_WHEEL_CUDA=OFF")
    oldest_cmake="-DCUSTOMOPS_WITH_CUDA=OFF"
  fi
  oldest_env=("${oldest_cpu_only[@]}" CUSTOMOPS_TORCH="$oldest"
              CUSTOMOPS_CMAKE_ARGS="${CUSTOMOPS_CMAKE_ARGS:-} -DCUSTOMOPS_WITH_CUTLASS=OFF $oldest_cmake")
  if [[ -n "${CUSTOMOPS_SETTINGS_ONLY:-}" ]]; then
    # What each leg builds with, and nothing more (test_scripts.py compares the newest leg's with the demo's).
    CUSTOMOPS_TEST_ONE_TORCH=1 bash "$0"
    env "${oldest_env[@]}" bash "$0"
    exit 0
  fi
  # Each pytest and ctest run writes a JUnit report here; scripts/test_summary.py reads them at the end.
  export CUSTOMOPS_JUNIT_DIR="${CUSTOMOPS_JUNIT_DIR:-$(mktemp -d)}"
  legs="$CUSTOMOPS_JUNIT_DIR/legs.tsv"
  : >"$legs"
  run_start=$SECONDS
  status=0
  # leg KEY LABEL START COMMAND...: runs a leg (CUSTOMOPS_LEG=KEY names its reports); its time since START (the wait
  # for its set-up included) and its exit status go to legs.tsv, for scripts/test_summary.py.
  leg() {
    local key="$1" label="$2" start="$3" leg_status=0
    shift 3
    CUSTOMOPS_LEG="$key" "$@" || leg_status=1
    printf '%s\t%s\t%d\t%d\n' "$key" "$label" $((SECONDS - start)) $leg_status >>"$legs"
    echo "customops: the $label leg took $((SECONDS - start)) s" >&2
    status=$((status | leg_status))
  }
  # The legs' tests run one after another; the next leg's set-up (its environment, its build) runs ahead, beside
  # the previous leg, at the lowest priority: its downloads wait on the network, not on the cores, and its build
  # takes what the tests leave idle (at normal priority, a build beside them made the tests 2.5 times as long).
  # The leg then finds its environment and build made, or shows what failed when it makes them itself. It still
  # pays with the caches warm (scripts/caches.sh): made alone, the oldest torch's set-up took 112 s and the
  # sanitized build 17 s, made ahead both were ready when their legs began; cold, the legs waited 190 and 213 s
  # for set-ups that took minutes more (2026-12-01, 2 cores, docs/guide/install.md's table).
  # A first run in a fresh clone writes about 20 GB (its three environments, three builds, the tests' own builds
  # and compiled kernels): on a fuller disk, say so first, so that a build failing half-way with "No space left on
  # device" is not a surprise.
  free_gb=$(df -Pk "$ROOT" "${TMPDIR:-/tmp}" |
    awk 'NR > 1 { gb = int($4 / 1048576); if (min == "" || gb < min) min = gb } END { print min }')
  ((free_gb >= 25)) || echo "customops: warning: $free_gb GB of disk free; a first run of the tests writes about" \
    "20 GB (environments, builds, the tests' temporary builds)" >&2
  bash "$ROOT/scripts/system_tools.sh"  # once, before anything runs beside it (apt-get holds a lock)
  ahead "torch $oldest's environment and build" env "${oldest_env[@]}" bash "$ROOT/scripts/install.sh"
  # The newest torch runs every test.
  leg newest "newest torch" $SECONDS env CUSTOMOPS_TEST_ONE_TORCH=1 bash "$0" "$@"
  start=$SECONDS
  wait_ahead
  ahead "the sanitized build" env CUSTOMOPS_SANITIZE_BUILD_ONLY=1 bash "$ROOT/scripts/sanitize.sh"
  # The oldest torch runs what can differ between torch versions: the tests not marked torch_independent
  # (pytest.ini; test_scripts.py checks that every test file chooses). It loads the newest torch's library, which
  # it must refuse at import (test_package.py). It builds without conv2d's sm_90a (CUTLASS) kernels, which the
  # newest's build compiles: with a GPU, the build of everyone whose TORCH_CUDA_ARCH_LIST lacks 9.0, or who has no
  # CUTLASS headers, must link and pass too. gradcheck compares the gradients along random directions, not whole
  # Jacobians (its fast mode). It builds both CPU kernel variants: with the DEFAULT ones alone (131 s less set-up)
  # and ATen's AVX2 kernels beside them, the model benchmark's check of mobilenet_v2 (training mode, batch 2, which
  # magnifies rounding) failed its margin (3.4e-3 against 3.1e-4).
  leg oldest "torch $oldest" "$start" env "${oldest_env[@]}" \
    CUSTOMOPS_OTHER_TORCH_LIBRARY="$ROOT/build/libcustomops.so" \
    CUSTOMOPS_GRADCHECK_FAST="${CUSTOMOPS_GRADCHECK_FAST:-1}" CUSTOMOPS_PYTEST_MARKERS="not torch_independent" \
    bash "$0" "$@"
  start=$SECONDS
  wait_ahead
  # The CPU kernels once more, built with AddressSanitizer and UndefinedBehaviorSanitizer.
  leg sanitized sanitized "$start" bash "$ROOT/scripts/sanitize.sh"
  # Each leg's time and counts, the slowest tests, and the time budget: a run past it fails here, loudly, while
  # CI's own limit (90 minutes, on a machine whose speed varies twofold from day to day) is still some way off.
  python3 "$ROOT/scripts/test_summary.py" "$CUSTOMOPS_JUNIT_DIR" --seconds $((SECONDS - run_start)) \
    --budget-minutes "${CUSTOMOPS_TEST_BUDGET_MINUTES:-60}" || status=1
  exit $status
fi

setup_start=$SECONDS
source "$ROOT/scripts/install.sh"
echo "customops: set-up (environment, compiler, build, install) took $((SECONDS - setup_start)) s" >&2
# The venv has scikit-build-core, onnx and the docs' packages (requirements/common.txt): the tests that need
# them must run, not skip.
if [[ -n "${VENV:-}" ]]; then
  export CUSTOMOPS_REQUIRE_PIP_TEST=1 CUSTOMOPS_REQUIRE_DOCS_TEST=1
  # The wheel test packs this build (the editable install's) instead of compiling everything again.
  export CUSTOMOPS_WHEEL_BUILD_DIR="$BUILD_DIR"
  "$PYTHON" -c 'import onnx, onnxscript, onnxruntime' || { echo "customops: the venv lacks the onnx extra" >&2; exit 1; }
  if [[ "$VENV_NAME" == .venv ]]; then
    # The TF-Lite tests through onnx2tf run against the newest torch, in a TF-Lite environment of their own
    # (onnx2tf's onnx and numpy pins clash with torch's), made once from the package's pinned list.
    tflite_env="$ROOT/.venv-tflite"
    tflite_stamp="$tflite_env/.requirements.sha256"
    if ! sha256sum --status -c "$tflite_stamp" 2>/dev/null; then
      "$PYTHON" -m customops.deploy.tflite_env "$tflite_env" ${CUSTOMOPS_WHEELS:+--wheels "$CUSTOMOPS_WHEELS"}
      sha256sum "$ROOT/python/customops/deploy/tflite-requirements.txt" >"$tflite_stamp"
    fi
    export CUSTOMOPS_TFLITE_PYTHON="$tflite_env/bin/python" CUSTOMOPS_REQUIRE_TFLITE_TEST=1
    # The build with nvcc from PyPI (test_toolchain.py) installs that compiler into this environment.
    export CUSTOMOPS_TOOLCHAIN_TEST=1
  else
    # The oldest torch's environment has litert-torch (requirements/torch-2.11.txt): the direct conversion's
    # tests run here; the onnx2tf ones ran against the newest torch.
    export CUSTOMOPS_REQUIRE_LITERT_TEST=1 CUSTOMOPS_TFLITE_ENV="$ROOT/.venv-tflite-none"
    unset CUSTOMOPS_TFLITE_PYTHON
  fi
fi
"$PYTHON" -c 'import sys, torch; print("customops: testing against torch", torch.__version__, "in", sys.executable)'

status=0
leg="${CUSTOMOPS_LEG:-tests}"
markers=()
[[ -z "${CUSTOMOPS_PYTEST_MARKERS:-}" ]] || markers=(-m "$CUSTOMOPS_PYTEST_MARKERS")
# shellcheck disable=SC2046
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900 $(ctest_junit "$leg")) || status=1
# shellcheck disable=SC2046
(cd "$ROOT" && "$PYTHON" -m pytest tests/python -q -p no:cacheprovider --durations=30 $(pytest_workers) \
  $(pytest_junit "$leg") ${markers[@]+"${markers[@]}"} "$@") || status=1
exit $status
