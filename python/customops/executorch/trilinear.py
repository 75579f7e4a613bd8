"""trilinear_interpolation: customops' kernel in ExecuTorch's runtime (kernels/executorch/trilinear.cpp, the CPU
kernel's maths), where the decomposition (the Inductor one: a weighted sum of the eight corners, core ATen
operators) is its fallback for runtimes built without customops' kernels."""

from __future__ import annotations

from ..inductor import trilinear as _inductor

DECOMPOSITIONS = {"trilinear_interpolation": _inductor.DECOMPOSITIONS["trilinear_interpolation"]}
# The op's route by default, where the kernel library is built: customops' kernel (its out variant).
KERNELS = {"trilinear_interpolation": "kernel"}
