"""upsample_bilinear2d_backward in compiled graphs (customops.inductor.upsample): on CUDA the op, which runs
eager's choice of kernel at each call, under every policy; on the CPU the scatter-adds, except under
deterministic algorithms. Tested on the CPU with the graphs of CUDA-shaped fake tensors."""

from __future__ import annotations

import pytest
import torch
from torch._inductor.decomposition import select_decomp_table
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import customops

pytestmark = pytest.mark.torch_dependent

ops, aten = torch.ops.customops, torch.ops.aten

# (input, output size, dtype, channels_last): the rule gives the first backward to PyTorch's kernel (checked
# below), the second to customops'.
CASES = [
    ((16, 64, 128, 128), (64, 64), torch.bfloat16, True),
    ((16, 64, 128, 128), (256, 256), torch.bfloat16, False),
]


def _backward_graph(shape, size, dtype, channels_last, device="cuda"):
    with FakeTensorMode():
        g = torch.empty(*shape[:2], *size, device=device, dtype=dtype)
        if channels_last:
            g = g.contiguous(memory_format=torch.channels_last)
    fn = make_fx(lambda g: ops.upsample_bilinear2d_backward(g, list(shape[2:]), "half_pixel"),
                 decomposition_table=select_decomp_table(), tracing_mode="fake")
    return fn(g).graph


def _keeps_op(graph) -> bool:
    kept = any(n.target is ops.upsample_bilinear2d_backward.default for n in graph.nodes)
    scatters = any(n.target in (aten.index_put.default, aten.index_put_.default) for n in graph.nodes)
    assert kept != scatters, graph
    return kept


@pytest.mark.parametrize("policy", ["auto", "customops", "pytorch"])
def test_cuda_graph_keeps_the_backward_op(policy):
    assert [customops.backends.upsample_bilinear2d_rule(*case)["backward"] for case in CASES] == [
        "pytorch", "customops"]
    with customops.backends.use("upsample_bilinear2d", policy):
        for case in CASES:
            assert _keeps_op(_backward_graph(*case))


def test_cpu_graph_scatters_except_under_deterministic_algorithms():
    assert not _keeps_op(_backward_graph(*CASES[0], device="cpu"))
    try:
        torch.use_deterministic_algorithms(True)
        assert _keeps_op(_backward_graph(*CASES[0], device="cpu"))
    finally:
        torch.use_deterministic_algorithms(False)
