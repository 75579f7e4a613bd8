#!/usr/bin/env bash
# Builds customops and installs it the way users get it, with pip: an editable install
# (pip install --no-build-isolation -e .) into the project's venv (scripts/env.sh: one per supported
# torch). The build goes to $BUILD_DIR with the GoogleTest suite, so that ctest runs in the same
# build; the library is installed into the venv's site-packages, not into the source tree.
#
# Where the scripts use an existing interpreter (CUSTOMOPS_PYTHON, e.g. python3 on the GPU
# machine: no network, no scikit-build-core), this is the plain CMake build, scripts/build.sh.
# Extra CMake arguments: CUSTOMOPS_CMAKE_ARGS (e.g. "-DCUSTOMOPS_WITH_CUDA=OFF").
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

if [[ -z "${VENV:-}" ]]; then
  source "$ROOT/scripts/build.sh"
else
  site="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  rm -f "$site/customops.pth"  # scripts/build.sh's path entry; the editable install replaces it
  cmake_args=(-C "cmake.define.CUSTOMOPS_BUILD_TESTS=ON" -C "cmake.define.CUSTOMOPS_PYTHON=$PYTHON")
  # shellcheck disable=SC2086
  for arg in ${CUSTOMOPS_CMAKE_ARGS:-}; do cmake_args+=(-C "cmake.args=$arg"); done
  echo "customops: building and installing with pip (pip install --no-build-isolation -e .) into $BUILD_DIR" >&2
  cached_build "the pip build in $BUILD_DIR" "$PYTHON" -m pip install -q --no-build-isolation --no-deps -e "$ROOT" -C "build-dir=$BUILD_DIR" "${cmake_args[@]}"
fi
