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

if [[ -z "${CUSTOMOPS_PYTHON:-}${CUSTOMOPS_TORCH:-}${CUSTOMOPS_TEST_ONE_TORCH:-}" ]]; then
  oldest="$(cd "$ROOT/requirements" && ls torch-*.txt | sed 's/^torch-//; s/\.txt$//' | sort -V | head -1)"
  # Without a GPU nothing compiled for one runs here: the newest torch's build proves that every CUDA source
  # compiles, to PTX (CUSTOMOPS_CUDA_PTX_ONLY: no ptxas, 10-20 s less a source; builds on the GPU machine make
  # the machine code), for one architecture, Hopper's (9.0, with the sm_90a kernels), not for each of the six a
  # build without a GPU targets (cmake/CustomopsCudaToolchain.cmake; that choice is checked at configure time,
  # test_toolchain.py; depthwise_conv2d.cu, for one, compiles in 55 s for two architectures, 132 s for the six and
  # PTX), and the
  # oldest torch's build is CPU-only: compiling the CUDA sources a second time took a third of a 2-core CI run's
  # 90 minutes' margin, and tests nothing more there than that they compile against the oldest torch's headers,
  # which every build on the GPU machine (torch 2.11) does. With a GPU both builds have CUDA kernels.
  newest_archs=() oldest_cpu_only=() oldest_cmake=""
  if [[ -z "${TORCH_CUDA_ARCH_LIST:-}" ]] && ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
    newest_archs=("TORCH_CUDA_ARCH_LIST=9.0"
                  "CUSTOMOPS_CMAKE_ARGS=${CUSTOMOPS_CMAKE_ARGS:-} -DCUSTOMOPS_CUDA_PTX_ONLY=ON")
    oldest_cpu_only=("CUSTOMOPS_WHEEL_CUDA=OFF")
    oldest_cmake="-DCUSTOMOPS_WITH_CUDA=OFF"
    echo "customops: no GPU here; the newest torch's build compiles CUDA code to PTX for 9.0, torch $oldest's is CPU-only" >&2
  fi
  oldest_env=("${oldest_cpu_only[@]}" CUSTOMOPS_TORCH="$oldest"
              CUSTOMOPS_CMAKE_ARGS="${CUSTOMOPS_CMAKE_ARGS:-} -DCUSTOMOPS_WITH_CUTLASS=OFF $oldest_cmake")
  # The legs' tests run one after another; the next leg's set-up (its environment, its build) runs ahead, beside
  # the previous leg, at the lowest priority: its downloads wait on the network, not on the cores, and its build
  # takes what the tests leave idle (at normal priority, a build beside them made the tests 2.5 times as long).
  # The leg then finds its environment and build made, or shows what failed when it makes them itself. It still
  # pays with the caches warm (scripts/caches.sh): made alone, the oldest torch's set-up took 112 s and the
  # sanitized build 17 s, made ahead both were ready when their legs began; cold, the legs waited 190 and 213 s
  # for set-ups that took minutes more (2026-12-01, 2 cores, docs/guide/install.md's table).
  bash "$ROOT/scripts/system_tools.sh"  # once, before anything runs beside it (apt-get holds a lock)
  ahead "torch $oldest's environment and build" env "${oldest_env[@]}" bash "$ROOT/scripts/install.sh"
  status=0
  start=$SECONDS
  env "${newest_archs[@]}" CUSTOMOPS_TEST_ONE_TORCH=1 bash "$0" "$@" || status=1
  echo "customops: tests against the default torch took $((SECONDS - start)) s" >&2
  start=$SECONDS
  wait_ahead
  ahead "the sanitized build" env CUSTOMOPS_SANITIZE_BUILD_ONLY=1 bash "$ROOT/scripts/sanitize.sh"
  # The newest torch's library, which the oldest must refuse at import (test_package.py). The oldest builds
  # without conv2d's sm_90a (CUTLASS) kernels, which the newest's build compiles: with a GPU, the build of everyone
  # whose TORCH_CUDA_ARCH_LIST lacks 9.0, or who has no CUTLASS headers, must link and pass too. Its two longest checks
  # take compact samples (the newest torch's leg runs them whole): a fifth of the fuzzer's calls (the first ones
  # of the same sequence) and three models of the zoo, the segmentation-style one among them; gradcheck compares
  # the gradients along random directions, not whole Jacobians (its fast mode). It builds both CPU kernel variants:
  # with the DEFAULT ones alone (131 s less set-up) and ATen's AVX2 kernels beside them, the model benchmark's check
  # of mobilenet_v2 (training mode, batch 2, which magnifies rounding) failed its margin (3.4e-3 against 3.1e-4).
  env "${oldest_env[@]}" CUSTOMOPS_OTHER_TORCH_LIBRARY="$ROOT/build/libcustomops.so" \
    CUSTOMOPS_FUZZ_CALLS="${CUSTOMOPS_FUZZ_CALLS:-20000}" CUSTOMOPS_GRADCHECK_FAST="${CUSTOMOPS_GRADCHECK_FAST:-1}" \
    CUSTOMOPS_ZOO_CHECK_MODELS="${CUSTOMOPS_ZOO_CHECK_MODELS:-efficientnet_b0,convnextv2_atto,fpn_mobilenetv3}" \
    bash "$0" "$@" || status=1
  echo "customops: tests against torch $oldest took $((SECONDS - start)) s" >&2
  start=$SECONDS
  wait_ahead
  # The CPU kernels once more, built with AddressSanitizer and UndefinedBehaviorSanitizer; the fuzzer's compact
  # sample, as in the oldest torch's leg (the sanitizers slow each call several times over).
  CUSTOMOPS_FUZZ_CALLS="${CUSTOMOPS_FUZZ_CALLS:-20000}" bash "$ROOT/scripts/sanitize.sh" || status=1
  echo "customops: the sanitized build and its tests took $((SECONDS - start)) s" >&2
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
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900) || status=1
# shellcheck disable=SC2046
(cd "$ROOT" && "$PYTHON" -m pytest tests/python -q -p no:cacheprovider --durations=30 $(pytest_workers) "$@") || status=1
exit $status
