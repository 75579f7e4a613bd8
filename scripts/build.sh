#!/usr/bin/env bash
# Configures and builds customops (library, tests, example) into $BUILD_DIR and
# makes `import customops` work from any directory in the chosen environment.
# Extra CMake arguments: CUSTOMOPS_CMAKE_ARGS (e.g. "-DCUSTOMOPS_WITH_CUDA=OFF").
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  # shellcheck disable=SC2086
  cmake -S "$ROOT" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCUSTOMOPS_PYTHON="$PYTHON" ${CUSTOMOPS_CMAKE_ARGS:-}
fi
cached_build "the build in $BUILD_DIR" cmake --build "$BUILD_DIR" --parallel "$(nproc)"

if [[ -n "${VENV:-}" ]]; then
  site="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$ROOT/python" >"$site/customops.pth"
fi
