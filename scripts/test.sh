#!/usr/bin/env bash
# Builds and installs (pip, see install.sh), then runs every test: GoogleTest (through
# ctest) and pytest. CUDA tests run when a GPU is present and skip otherwise.
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"
# The venv has scikit-build-core (requirements.txt): the pip wheel test must run, not skip.
if [[ -n "${VENV:-}" ]]; then export CUSTOMOPS_REQUIRE_PIP_TEST=1; fi

status=0
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900) || status=1
(cd "$ROOT" && "$PYTHON" -m pytest tests/python -q -p no:cacheprovider "$@") || status=1
exit $status
