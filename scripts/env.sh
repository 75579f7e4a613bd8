# Sourced by the other scripts: sets ROOT, BUILD_DIR and PYTHON.
#
# Default: a project-local virtual environment, .venv, with requirements.txt (the newest
# supported torch) installed (network needed the first time), built into build/.
# CUSTOMOPS_TORCH=<version> (one of requirements/torch-<version>.txt, e.g. 2.11) uses that
# torch instead, in .venv-torch<version>, built into build-torch<version>/.
# On a machine whose python already has torch and no network (the GPU machine), set
# CUSTOMOPS_PYTHON=python3: no venv is made and nothing is installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQUIREMENTS="$ROOT/requirements.txt"
VENV_NAME=.venv
BUILD_NAME=build
if [[ -n "${CUSTOMOPS_TORCH:-}" && -z "${CUSTOMOPS_PYTHON:-}" ]]; then
  REQUIREMENTS="$ROOT/requirements/torch-$CUSTOMOPS_TORCH.txt"
  if [[ ! -f "$REQUIREMENTS" ]]; then
    echo "customops: CUSTOMOPS_TORCH=$CUSTOMOPS_TORCH is not a supported torch; supported:" \
      "$(cd "$ROOT/requirements" && ls torch-*.txt | sed 's/^torch-//; s/\.txt$//' | tr '\n' ' ')" >&2
    exit 2
  fi
  VENV_NAME=".venv-torch$CUSTOMOPS_TORCH"
  BUILD_NAME="build-torch$CUSTOMOPS_TORCH"
fi
BUILD_DIR="${CUSTOMOPS_BUILD_DIR:-$ROOT/$BUILD_NAME}"
export CUSTOMOPS_BUILD_DIR="$BUILD_DIR"

ensure_system_tools() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v g++ >/dev/null || missing+=(g++)
  [[ -e /usr/include/gtest/gtest.h ]] || missing+=(libgtest-dev)
  command -v dot >/dev/null || missing+=(graphviz)      # the docs' architecture diagram
  command -v chromium >/dev/null || missing+=(chromium)  # tests/python/test_docs.py opens the built site
  if ((${#missing[@]})); then
    echo "customops: installing ${missing[*]} with apt-get" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

if [[ -n "${CUSTOMOPS_PYTHON:-}" ]]; then
  PYTHON="$(command -v "$CUSTOMOPS_PYTHON")"
  export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
else
  ensure_system_tools
  VENV="$ROOT/$VENV_NAME"
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  stamp="$VENV/.requirements.sha256"
  if ! sha256sum --status -c "$stamp" 2>/dev/null; then
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -r "$REQUIREMENTS"
    "$VENV/bin/python" -m pip install -q --no-deps -r "$ROOT/requirements-headers.txt"
    sha256sum "$ROOT"/requirements*.txt "$ROOT"/requirements/*.txt >"$stamp"
  fi
  PYTHON="$VENV/bin/python"
  export PATH="$VENV/bin:$PATH"
fi
export CUSTOMOPS_PYTHON="$PYTHON"
