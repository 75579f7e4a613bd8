#!/usr/bin/env bash
# Builds customops into $BUILD_DIR and makes `import customops` load what it built, in the chosen environment.
#
# In the project's environment (scripts/env.sh's venv, where the README's set-up installed customops with pip -e),
# Python loads the library pip installed into site-packages, not the one a plain CMake build leaves in $BUILD_DIR:
# there this rebuilds through the same editable install (scripts/install.sh, into the same $BUILD_DIR, so only
# what changed compiles), and Python sees the rebuild. With CUSTOMOPS_PYTHON (an interpreter of one's own, no
# venv), it is the plain CMake build, which stages the library into python/customops/lib for PYTHONPATH=python.
# Extra CMake arguments: CUSTOMOPS_CMAKE_ARGS (e.g. "-DCUSTOMOPS_WITH_CUDA=OFF").
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

if [[ -n "${VENV:-}" ]]; then
  # env.sh exported CUSTOMOPS_PYTHON (the venv's python), which would make install.sh take it for an interpreter of
  # one's own and build with plain CMake.
  env -u CUSTOMOPS_PYTHON bash "$ROOT/scripts/install.sh"
else
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    # shellcheck disable=SC2086
    cmake -S "$ROOT" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCUSTOMOPS_PYTHON="$PYTHON" ${CUSTOMOPS_CMAKE_ARGS:-}
  fi
  cached_build "the build in $BUILD_DIR" cmake --build "$BUILD_DIR" --parallel "$(nproc)"
fi
