#!/usr/bin/env bash
# The main job: builds and installs (pip), then runs each operator through Python eager,
# torch.compile, TorchScript in C++ and AOTInductor in C++, against the plain-PyTorch
# reference. AOTInductor compiles one package of every op per device (a minute or two on
# a small CPU machine; its time is reported). Skip that path with --no-aoti.
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"
"$PYTHON" -m customops.demo --runner "$BUILD_DIR/examples/customops_torchscript" \
  --aoti-runner "$BUILD_DIR/examples/customops_aoti" "$@"
