"""causal_conv1d: customops' kernel in ExecuTorch's runtime (kernels/executorch/causal_conv1d.cpp, the CPU kernel's
filter); the decomposition (``aten.convolution`` with C groups and K-1 leading zeros) for runtimes without it."""

from __future__ import annotations

from ..inductor import causal_conv1d as _inductor

# Mamba's training-call arguments (causal_conv1d.mamba) have no ExecuTorch kernel: always decomposed.
DECOMPOSITIONS = {"causal_conv1d": _inductor.DECOMPOSITIONS["causal_conv1d"],
                  "causal_conv1d.mamba": _inductor.DECOMPOSITIONS["causal_conv1d.mamba"]}
KERNELS = {"causal_conv1d": "kernel"}
