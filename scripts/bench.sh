#!/usr/bin/env bash
# Builds, then runs the benchmark table: scripts/bench.sh [--device cuda] [--markdown F] [--plot F] ...
source "$(dirname "${BASH_SOURCE[0]}")/build.sh"
"$PYTHON" -m customops.benchmark "$@"
