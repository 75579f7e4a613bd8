"""causal_conv1d: customops' kernel in ExecuTorch's runtime (kernels/executorch/causal_conv1d.cpp, the CPU kernel's
filter); the decomposition (``aten.convolution`` with C groups and K-1 leading zeros) for runtimes without it.

The decoding step (``causal_conv1d.update``, which updates its ``conv_state`` buffer in place) runs on customops'
kernel alone, whatever the routes: ExecuTorch's ``to_executorch`` takes the in-place op out of its functionalised
form and calls its out variant (``causal_conv1d.update_out``) on the program's mutable buffer. It has no
decomposition: a program with the step needs libcustomops_executorch.so."""

from __future__ import annotations

from ..inductor import causal_conv1d as _inductor

# Mamba's training-call arguments (causal_conv1d.mamba) have no ExecuTorch kernel: always decomposed.
DECOMPOSITIONS = {"causal_conv1d": _inductor.DECOMPOSITIONS["causal_conv1d"],
                  "causal_conv1d.mamba": _inductor.DECOMPOSITIONS["causal_conv1d.mamba"]}
KERNELS = {"causal_conv1d": "kernel"}
