#!/usr/bin/env bash
# The main job: builds, then runs each operator through Python eager,
# torch.compile and TorchScript-in-C++, against the plain-PyTorch reference.
source "$(dirname "${BASH_SOURCE[0]}")/build.sh"
"$PYTHON" -m customops.demo --runner "$BUILD_DIR/examples/customops_torchscript" "$@"
