#!/usr/bin/env bash
# Builds, then runs every test: GoogleTest (through ctest) and pytest. CUDA tests
# run when a GPU is present and skip otherwise.
source "$(dirname "${BASH_SOURCE[0]}")/build.sh"

status=0
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900) || status=1
(cd "$ROOT" && "$PYTHON" -m pytest tests/python -q -p no:cacheprovider "$@") || status=1
exit $status
