#!/usr/bin/env bash
# Builds the stable-ABI quick_gelu prototype once, checks that the binary depends on
# libtorch's C shim only, and runs the tests with that one binary under several torch
# releases.
#
#   examples/stable_abi/check.sh [PYTHON...]
#
# The build uses the torch of $BUILD_PYTHON (default python3; torch 2.11, the oldest
# release the binary targets). The tests then run under $BUILD_PYTHON and under every
# PYTHON given, each with its own torch, without rebuilding. CUDA kernels are built when
# that torch has CUDA and nvcc is found (CUDACXX, PATH or /usr/local/cuda); CUDA tests
# run where a GPU is visible and skip elsewhere.
#
# Environment: BUILD_PYTHON, BUILD_DIR (default <repo>/build-stable-abi), CMAKE,
# CUSTOMOPS_STABLE_WITH_CUDA (AUTO, ON or OFF), CMAKE_CUDA_ARCHITECTURES (default 90),
# PYTEST_ARGS (extra pytest arguments, e.g. "-x -k cuda").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD_PYTHON=${BUILD_PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-$root/build-stable-abi}
if [[ -z "${CMAKE:-}" ]]; then
  # A venv may carry cmake (pip install cmake) where the system has none.
  CMAKE=$(command -v cmake || echo "$(dirname "$(command -v "$BUILD_PYTHON")")/cmake")
fi
lib=$BUILD_DIR/libcustomops_stable.so

echo "== build against $("$BUILD_PYTHON" -c 'import torch; print("torch", torch.__version__)') ($BUILD_PYTHON)"
"$CMAKE" -S "$here" -B "$BUILD_DIR" -DCUSTOMOPS_STABLE_PYTHON="$BUILD_PYTHON" \
  -DCUSTOMOPS_STABLE_WITH_CUDA="${CUSTOMOPS_STABLE_WITH_CUDA:-AUTO}" \
  ${CMAKE_CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES"}
"$CMAKE" --build "$BUILD_DIR" --parallel

echo "== dependencies of $lib"
readelf -d "$lib" | grep -E 'NEEDED|RPATH|RUNPATH' || true
undefined=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | sed 's/@.*//')
shim=$(grep -E '^(aoti_torch_|torch_)' <<<"$undefined" || true)
echo "libtorch C shim functions used: $(wc -l <<<"$shim")"
echo "$shim" | tr '\n' ' ' | fold -s -w 120
echo
# Any mangled libtorch name (c10::, at::, torch::, also inside std:: templates) would tie
# the binary to the torch it was built against. libstdc++/libc/libgcc symbols are fine.
libtorch_cxx=$(grep '^_Z' <<<"$undefined" | c++filt | grep -E '\b(c10|at|torch|caffe2)::' || true)
if [[ -n "$libtorch_cxx" ]]; then
  echo "FAIL: the library uses libtorch C++ symbols, so it is not ABI stable:" >&2
  echo "$libtorch_cxx" >&2
  exit 1
fi
echo "libtorch C++ (mangled c10/at/torch) symbols used: none"
glibc=$(objdump -T "$lib" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
glibcxx=$(objdump -T "$lib" | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)
echo "newest symbol versions needed: $glibc, $glibcxx"
has_cuda_kernels=0
if grep -qx aoti_torch_get_current_cuda_stream <<<"$shim"; then
  has_cuda_kernels=1
fi

failed=()
for py in "$BUILD_PYTHON" "$@"; do
  version=$("$py" -c 'import torch; print(torch.__version__)')
  gpu=$("$py" -c 'import torch; print(int(torch.cuda.is_available()))')
  echo "== tests under torch $version ($py), GPU visible: $gpu"
  if [[ $gpu == 1 && $has_cuda_kernels == 0 ]]; then
    echo "FAIL: a GPU is visible but the library has no CUDA kernels (no nvcc, or torch without CUDA at build time)" >&2
    failed+=("$version")
    continue
  fi
  # shellcheck disable=SC2086  # PYTEST_ARGS is a list of words
  if ! (cd "$here" && CUSTOMOPS_STABLE_LIB="$lib" "$py" -m pytest -p no:cacheprovider -q -rs ${PYTEST_ARGS:-} \
        test_stable_quick_gelu.py); then
    failed+=("$version")
  fi
done

if ((${#failed[@]})); then
  echo "== FAILED under torch ${failed[*]}" >&2
  exit 1
fi
echo "== one binary, all tests passed under every torch given"
