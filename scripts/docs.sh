#!/usr/bin/env bash
# Builds the documentation site (Sphinx, docs/) into OUT_DIR (default: build/docs/html), warnings as errors:
#   scripts/docs.sh [OUT_DIR] [extra sphinx-build arguments]
# The site is generated partly from the built library (the API pages from the docstrings, the schema and
# dispatch-key tables from the dispatcher, the per-operator tables from the package's modules), so build customops
# first (scripts/install.sh or scripts/build.sh).
# Python: the project's environment (scripts/env.sh: .venv, CUSTOMOPS_TORCH=<version>, or CUSTOMOPS_PYTHON=python3).
# Needs the docs' Python packages (sphinx, myst-parser, furo), onnxscript (the ONNX table is read from
# customops.onnx's modules, which import it) and Graphviz's dot (Debian package graphviz).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

OUT="${1:-$ROOT/build/docs/html}"
shift || true
"$PYTHON" -c 'import sphinx, myst_parser, furo, onnxscript' 2>/dev/null || {
  echo "customops: the docs need sphinx, myst-parser, furo and onnxscript in $PYTHON" >&2
  exit 1
}
command -v dot >/dev/null || { echo "customops: the docs need Graphviz's dot (apt-get install graphviz)" >&2; exit 1; }
"$PYTHON" -m sphinx -W --keep-going -b html "$ROOT/docs" "$OUT" "$@"
echo "customops: documentation in $OUT/index.html" >&2
