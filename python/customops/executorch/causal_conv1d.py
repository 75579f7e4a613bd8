"""causal_conv1d: customops' kernel in ExecuTorch's runtime (kernels/executorch/causal_conv1d.cpp, the CPU kernel's
filter); the decomposition (``aten.convolution`` with C groups and K-1 leading zeros) for runtimes without it."""

from __future__ import annotations

from ..inductor import causal_conv1d as _inductor

DECOMPOSITIONS = {"causal_conv1d": _inductor.DECOMPOSITIONS["causal_conv1d"]}
KERNELS = {"causal_conv1d": "kernel"}
