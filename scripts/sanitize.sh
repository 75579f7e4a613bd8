#!/usr/bin/env bash
# Builds customops CPU-only, its DEFAULT kernels alone (see below), with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-asan/ (against the environment's torch, see env.sh) and runs under them the
# C++ tests and the Python tests that reach every CPU kernel: the ops' generic tests (forward, backward, gradcheck,
# errors, fake kernels), the property tests' CI profile, the fuzz test, the concurrency tests and causal_conv1d's
# decoding tests. A sanitizer report fails the run. Arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

ASAN_BUILD="${CUSTOMOPS_ASAN_BUILD_DIR:-$ROOT/build-asan}"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$ROOT" -B "$ASAN_BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUSTOMOPS_PYTHON="$PYTHON" -DCUSTOMOPS_WITH_EXECUTORCH=OFF \
  -DCUSTOMOPS_WITH_CUDA=OFF -DCUSTOMOPS_SANITIZE=ON -DCUSTOMOPS_STAGE_PYTHON=OFF \
  -DCUSTOMOPS_CPU_CAPABILITIES=DEFAULT >/dev/null
cached_build "the sanitized build" cmake --build "$ASAN_BUILD" --parallel "$(nproc)"
# CUSTOMOPS_SANITIZE_BUILD_ONLY=1: the build alone (scripts/test.sh makes it ahead, beside another leg's tests).
[[ -z "${CUSTOMOPS_SANITIZE_BUILD_ONLY:-}" ]] || exit 0

# Python and libtorch keep allocations until exit by design; leak reports would be about them, not us. An
# allocation too large for memory fails as it does unsanitized (ATen raises), not as an ASan report; SIGFPE
# and SIGSEGV are left to the program (the fuzz test's harness names the signal that killed its child).
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allow_user_segv_handler=1:allocator_may_return_null=1:handle_sigfpe=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export CUSTOMOPS_LIBRARY="$ASAN_BUILD/libcustomops.so" CUSTOMOPS_BUILD_DIR="$ASAN_BUILD"
# The build holds the DEFAULT kernels alone, the ones of processors without AVX2 (and of ARM): ATen takes its
# own DEFAULT kernels too, so that both the library's dispatch and ATen's agree, and that path runs somewhere.
export ATEN_CPU_CAPABILITY=default
# That also makes Inductor generate scalar code, but its caches do not key on it: a graph compiled and cached
# vectorised by an earlier run on this machine came back as source using at::vec, built without it (a C++
# compile error in test_autocast). Its own cache directory keeps the two apart, shared by the checkouts here
# as the default one is (scripts/caches.sh).
export TORCHINDUCTOR_CACHE_DIR="$CUSTOMOPS_CACHE_HOME/inductor-scalar"

status=0
# The test programs link the ASan runtime themselves. The install test is left out: it builds a separate,
# uninstrumented consumer project (its CMake and nvcc must not load the runtime, nor can its program load it
# first), and what it checks, the installed package, the unsanitized builds test.
leg="${CUSTOMOPS_LEG:-sanitized}"
# shellcheck disable=SC2046
(cd "$ASAN_BUILD" && ctest --output-on-failure --timeout 900 -E install_and_consume $(ctest_junit "$leg")) || status=1
# libtorch and Python are not instrumented: the ASan runtime must be loaded before them.
# (Worked out before the ASan runtime is preloaded: they run python and nvidia-smi.)
per_file="$(pytest_workers)" per_test="$(pytest_workers load)"
cxx="${CXX:-g++}"
export LD_PRELOAD="$("$cxx" -print-file-name=libasan.so) $("$cxx" -print-file-name=libubsan.so)"
cd "$ROOT"
# shellcheck disable=SC2086
"$PYTHON" -m pytest -q -p no:cacheprovider $per_test $(pytest_junit "$leg") tests/python/test_ops.py \
  -k "matches_reference or gradcheck or error_inputs or fake_kernels or autocast" "$@" || status=1
# shellcheck disable=SC2086
"$PYTHON" -m pytest -q -p no:cacheprovider $per_file $(pytest_junit "$leg") tests/python/test_properties.py \
  tests/python/test_fuzz.py tests/python/test_concurrency.py "$@" || status=1
# causal_conv1d's states and decoding step beyond the op table's samples (circular states, a cache's rows, vmap,
# threads), less the paths that compile or start other programs.
# shellcheck disable=SC2086
"$PYTHON" -m pytest -q -p no:cacheprovider $per_test $(pytest_junit "$leg") \
  tests/python/test_causal_conv1d_states.py tests/python/test_causal_conv1d_update.py \
  -k "not aoti and not torchscript and not compile and not export and not onnx" "$@" || status=1
exit $status
