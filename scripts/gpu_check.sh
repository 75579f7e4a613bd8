#!/usr/bin/env bash
# Everything worth running on the GPU machine, in one call (its python3 already
# has torch; it has no network): build, all tests, compute-sanitizer over the
# C++ tests, the benchmarks (op table, model training steps and their depthwise layers, written into
# docs/ and $OUT) and the demo. One part alone, to fit a time limit: `tests`
# (build, tests, sanitizer), `bench` (build, benchmarks, demo) or `sanitize` (build, then compute-sanitizer's
# memcheck, racecheck, initcheck and synccheck over the C++ tests and over the CUDA samples of every op's
# generic tests: forward and backward of each OpInfo sample in each dtype) or `long` (build, then the property
# tests' long profile on CUDA; arguments after it go to pytest instead of `-k cuda`, e.g. to split the run up:
# -k "cuda and test_forward").
#   CUSTOMOPS_PYTHON=python3 scripts/gpu_check.sh [tests|bench|sanitize|long [pytest arguments]]
set -uo pipefail
export CUSTOMOPS_PYTHON="${CUSTOMOPS_PYTHON:-python3}" PYTHONUNBUFFERED=1
# That machine's environment names a g++ that links libstdc++ statically
# (cmake/CustomopsSharedLibstdcxx.cmake refuses it): build with the system one.
export CXX="${CUSTOMOPS_CXX:-/usr/bin/g++}" CUDAHOSTCXX="${CUSTOMOPS_CXX:-/usr/bin/g++}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/build-gpu-out}"
mkdir -p "$OUT" "$ROOT/docs/benchmarks"
export CUSTOMOPS_BUILD_DIR="${CUSTOMOPS_BUILD_DIR:-$ROOT/build-gpu}"
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
# CUTLASS's headers (conv2d's implicit GEMM) come from the nvidia-cutlass wheel; that machine has no network,
# so a wheel brought along in .whl/ is installed (headers only, no dependencies) into a temporary directory.
if ! "$CUSTOMOPS_PYTHON" -c "import importlib.util as u, sys; sys.exit(u.find_spec('cutlass_library') is None)"; then
  for wheel in "$ROOT"/.whl/nvidia_cutlass-*.whl; do
    [[ -f "$wheel" ]] || continue
    "$CUSTOMOPS_PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/customops-site "$wheel" \
      && export PYTHONPATH="$PYTHONPATH:/tmp/customops-site"
  done
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

part="${1:-all}"
status=0
# The parts that run no tests build first, quietly (the log in $OUT), and stop on a failed build.
build_only() {
  bash "$ROOT/scripts/build.sh" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
}
if [[ "$part" == long ]]; then
  shift
  selection=("$@")
  ((${#selection[@]})) || selection=(-k cuda)
  build_only
  # Random examples (not derandomized): a failure prints the example and its reproduce_failure blob; a crash prints
  # the Python stack (faulthandler).
  (cd "$ROOT" && CUSTOMOPS_HYPOTHESIS_PROFILE=long "$CUSTOMOPS_PYTHON" -X faulthandler -m pytest -q \
    -p no:cacheprovider tests/python/test_properties.py "${selection[@]}") >"$OUT/long.log" 2>&1 || status=1
  tail -40 "$OUT/long.log"
  echo "gpu_check exit status: $status"
  exit $status
fi
if [[ "$part" == sanitize ]]; then
  build_only
  # The four tools run side by side (each slows its process 10-100x; the GPU has room for all), one log each.
  sanitize() {
    local tool="$1" log="$OUT/sanitizer_$1.log" rc=0 options=()
    # PyTorch's resize_ (its im2col, the im2col reference, uses it) copies a new storage's uninitialised bytes with
    # cudaMemcpy; the library itself makes no copies, so initcheck watches the kernels' loads only.
    [[ "$tool" == initcheck ]] && options=(--check-api-memory-access no)
    compute-sanitizer --tool "$tool" "${options[@]}" --error-exitcode 9 "$CUSTOMOPS_BUILD_DIR/tests/cpp/customops_tests" \
      >"$log" 2>&1 || rc=1
    # Every sample's forward and backward in every dtype (gradcheck's thousands of small calls would take these
    # tools most of an hour).
    (cd "$ROOT" && compute-sanitizer --tool "$tool" "${options[@]}" --error-exitcode 9 --target-processes all \
      "$CUSTOMOPS_PYTHON" -m pytest -q -p no:cacheprovider tests/python/test_ops.py -k "cuda and matches_reference") \
      >>"$log" 2>&1 || rc=1
    return $rc
  }
  pids=()
  for tool in memcheck racecheck initcheck synccheck; do sanitize "$tool" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  for tool in memcheck racecheck initcheck synccheck; do
    echo "== compute-sanitizer --tool $tool"
    grep -E "ERROR SUMMARY|passed|failed|error" "$OUT/sanitizer_$tool.log" | tail -4
  done | tee "$OUT/sanitizer.log"
  echo "gpu_check exit status: $status"
  exit $status
fi
if [[ "$part" != bench ]]; then
  bash "$ROOT/scripts/test.sh" -rs 2>&1 | tee "$OUT/test.log" || status=1
  if command -v compute-sanitizer >/dev/null; then
    compute-sanitizer --tool memcheck --error-exitcode 9 "$CUSTOMOPS_BUILD_DIR/tests/cpp/customops_tests" \
      2>&1 | tail -5 | tee "$OUT/sanitizer.log" || status=1
  fi
  [[ "$part" == tests ]] && { echo "gpu_check exit status: $status"; exit $status; }
else
  build_only
fi
tag="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -cs 'A-Za-z0-9' '_' | sed 's/_$//')"
# Relative paths, so that the command recorded in the table is the one to type.
cd "$ROOT"
python3 -m customops.benchmark --device cuda --markdown "docs/benchmarks/cuda_${tag}.md" \
  --plot "docs/benchmarks/cuda_${tag}.png" 2>&1 | tee "$OUT/bench.log" || status=1
python3 -m customops.benchmark.breakdown --markdown "docs/benchmarks/cuda_${tag}.md" 2>&1 \
  | tee -a "$OUT/bench.log" || status=1
python3 -m customops.benchmark.models --device cuda --markdown "docs/benchmarks/models_cuda_${tag}.md" \
  --plot "docs/benchmarks/models_cuda_${tag}.png" 2>&1 | tee -a "$OUT/bench.log" || status=1
python3 -m customops.benchmark.layers --device cuda --markdown "docs/benchmarks/layers_cuda_${tag}.md" 2>&1 \
  | tee -a "$OUT/bench.log" || status=1
python3 -m customops.benchmark.conv2d --markdown "docs/benchmarks/conv2d_${tag}.md" 2>&1 \
  | tee -a "$OUT/bench.log" || status=1
cp "docs/benchmarks/cuda_${tag}".* "docs/benchmarks/models_cuda_${tag}".* "docs/benchmarks/layers_cuda_${tag}.md" \
  "docs/benchmarks/conv2d_${tag}.md" "$OUT/" 2>/dev/null
python3 -m customops.demo --runner "$CUSTOMOPS_BUILD_DIR/examples/customops_torchscript" \
  --aoti-runner "$CUSTOMOPS_BUILD_DIR/examples/customops_aoti" 2>&1 | tee -a "$OUT/bench.log" || status=1
echo "gpu_check exit status: $status"
exit $status
