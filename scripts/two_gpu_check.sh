#!/usr/bin/env bash
# On a machine with two GPUs (the GPU machine's nvidia-h200-x2): builds, then runs
# scripts/two_gpu_check.py (DDP, FSDP2, tensor parallel) in two processes over NCCL.
# NCCL's environment (NVLink multicast off there) is left as it is.
#   CUSTOMOPS_PYTHON=python3 scripts/two_gpu_check.sh
set -uo pipefail
export CUSTOMOPS_PYTHON="${CUSTOMOPS_PYTHON:-python3}" PYTHONUNBUFFERED=1
export CXX="${CUSTOMOPS_CXX:-/usr/bin/g++}" CUDAHOSTCXX="${CUSTOMOPS_CXX:-/usr/bin/g++}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CUSTOMOPS_BUILD_DIR="${CUSTOMOPS_BUILD_DIR:-$ROOT/build-gpu}"
bash "$ROOT/scripts/build.sh" >"${OUT:-/tmp}/two_gpu_build.log" 2>&1 || { tail -30 "${OUT:-/tmp}/two_gpu_build.log"; exit 1; }
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name --format=csv,noheader
exec "$CUSTOMOPS_PYTHON" -m torch.distributed.run --nproc-per-node 2 "$ROOT/scripts/two_gpu_check.py" --device cuda
