"""Tests of the stable-ABI quick_gelu prototype (customops_stable namespace).

Run by check.sh, under the torch the library was built against and under any later
one: the point of the stable ABI is that the same binary passes in all of them.
"""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import customops_stable  # noqa: E402  (loads the library, registers autograd and fake kernels)

ops = customops_stable.ops
ALPHA = customops_stable.ALPHA

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device"))]
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")

LOW_PRECISION = [torch.float32, torch.float16, torch.bfloat16]
# Results are computed in float and rounded once: within a unit or two of the last place.
TOL = {
    torch.float64: dict(rtol=1e-12, atol=1e-12),
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.float16: dict(rtol=2e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
}


def reference(x):
    xd = x.double()
    return (xd * torch.sigmoid(ALPHA * xd)).to(x.dtype)


def reference_backward(g, x):
    xd = x.double().requires_grad_()
    (grad,) = torch.autograd.grad(xd * torch.sigmoid(ALPHA * xd), xd, g.double())
    return grad.to(x.dtype)


def layouts(device, dtype):
    """Inputs of one shape in several memory layouts: the kernels must read each one right."""
    base = torch.randn(4, 6, 5, 7, device=device, dtype=dtype) * 4
    return {
        "contiguous": base,
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "transposed": base.transpose(1, 3),
        "sliced": base[:, ::2, 1:],
        "expanded": base[:1, :1].expand(4, 6, 5, 7),
        "scalar": base[0, 0, 0, 0],
        "empty": base[:0],
    }


def test_schemas():
    assert str(ops.quick_gelu.default._schema) == "customops_stable::quick_gelu(Tensor x) -> Tensor"
    assert str(ops.quick_gelu_backward.default._schema) == \
        "customops_stable::quick_gelu_backward(Tensor grad_out, Tensor x) -> Tensor"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, *LOW_PRECISION])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "sliced", "expanded", "scalar",
                                    "empty"])
def test_forward_and_backward_match_reference(device, dtype, layout):
    x = layouts(device, dtype)[layout]
    g = torch.randn_like(x)
    y = ops.quick_gelu(x)
    assert y.dtype == dtype and y.shape == x.shape and y.device == x.device
    torch.testing.assert_close(y, reference(x), **TOL[dtype])
    torch.testing.assert_close(ops.quick_gelu_backward(g, x), reference_backward(g, x), **TOL[dtype])


@pytest.mark.parametrize("device", DEVICES)
def test_output_keeps_dense_layouts(device):
    """Like the full library: a dense input's strides carry over, so channels_last stays channels_last."""
    for layout in ["contiguous", "channels_last", "transposed"]:
        x = layouts(device, torch.float32)[layout]
        assert ops.quick_gelu(x).stride() == x.stride(), layout
        assert ops.quick_gelu_backward(torch.randn_like(x), x).stride() == x.stride(), layout
    sliced = layouts(device, torch.float32)["sliced"]
    assert ops.quick_gelu(sliced).is_contiguous()


@pytest.mark.parametrize("device", DEVICES)
def test_backward_with_grad_in_other_layout(device):
    x = torch.randn(3, 8, 5, 5, device=device).contiguous(memory_format=torch.channels_last)
    g = torch.randn(3, 8, 5, 5, device=device)
    got = ops.quick_gelu_backward(g, x)
    torch.testing.assert_close(got, reference_backward(g, x))
    assert got.stride() == x.stride()


@pytest.mark.parametrize("device", DEVICES)
def test_extremes_are_finite(device):
    x = torch.tensor([-1e4, -100.0, -20.0, 0.0, 20.0, 100.0, 1e4], device=device)
    y = ops.quick_gelu(x)
    dx = ops.quick_gelu_backward(torch.ones_like(x), x)
    assert torch.isfinite(y).all() and torch.isfinite(dx).all()
    torch.testing.assert_close(y, reference(x))


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_float64(device):
    x = torch.randn(3, 4, 5, device=device, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ops.quick_gelu, (x,))
    assert torch.autograd.gradgradcheck(ops.quick_gelu, (x,))
    g = torch.randn(3, 4, 5, device=device, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ops.quick_gelu_backward, (g, x))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", LOW_PRECISION)
def test_autograd_matches_reference(device, dtype):
    x = (torch.randn(64, 33, device=device, dtype=dtype) * 3).requires_grad_()
    g = torch.randn(64, 33, device=device, dtype=dtype)
    customops_stable.quick_gelu(x).backward(g)
    torch.testing.assert_close(x.grad, reference_backward(g, x.detach()), **TOL[dtype])


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    """torch.library's own consistency checks: schema, fake kernel, autograd registration, AOT dispatch."""
    x = torch.randn(5, 6, device=device, requires_grad=True)
    torch.library.opcheck(ops.quick_gelu.default, (x,))
    torch.library.opcheck(ops.quick_gelu_backward.default, (torch.randn(5, 6, device=device), x.detach()))
    xt = torch.randn(6, 5, device=device).t()
    torch.library.opcheck(ops.quick_gelu.default, (xt,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph(device, dynamic):
    torch._dynamo.reset()

    def f(x):
        return customops_stable.quick_gelu(x * 2).sum(dim=-1)

    compiled = torch.compile(f, fullgraph=True, dynamic=dynamic)
    for shape in [(4, 7), (5, 9)]:
        x = torch.randn(*shape, device=device, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out = compiled(x)
        want = f(x_ref)
        torch.testing.assert_close(out, want)
        g = torch.randn_like(out)
        out.backward(g)
        want.backward(g)
        torch.testing.assert_close(x.grad, x_ref.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x = torch.randn(3, 4, device=device)
    with pytest.raises(RuntimeError, match=r"customops_stable::quick_gelu: expected x to be a floating-point tensor"
                                           r" \(float16, bfloat16, float32 or float64\), got Long"):
        ops.quick_gelu(torch.arange(3, device=device))
    with pytest.raises(RuntimeError, match=r"expected grad_out to have the shape of x \[3, 4\], got \[4, 3\]"):
        ops.quick_gelu_backward(torch.randn(4, 3, device=device), x)
    with pytest.raises(RuntimeError, match=r"expected grad_out to have the dtype of x \(Float\), got Double"):
        ops.quick_gelu_backward(x.double(), x)
    with pytest.raises(RuntimeError, match=r"expected grad_out to be a floating-point tensor"):
        ops.quick_gelu_backward(torch.ones(3, 4, device=device, dtype=torch.int32), x)


@requires_cuda
def test_cuda_device_mismatch():
    x = torch.randn(3, 4, device="cuda")
    with pytest.raises(RuntimeError, match=r"expected grad_out and x on the same device, got grad_out on cpu and x "
                                           r"on cuda:0"):
        ops.quick_gelu_backward(torch.randn(3, 4), x)


@requires_cuda
def test_cuda_current_stream_and_graph_capture():
    """The kernels launch on torch's current stream: a CUDA graph captures only work on the capturing stream, and
    a launch on any other stream during capture is an error."""
    x = torch.randn(1 << 16, device="cuda")
    g = torch.randn_like(x)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        y = ops.quick_gelu(x)
        dx = ops.quick_gelu_backward(g, x)
    stream.synchronize()
    torch.testing.assert_close(y, reference(x))
    torch.testing.assert_close(dx, reference_backward(g, x))

    ops.quick_gelu(x)  # warm-up outside the capture (allocator, lazy init)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = ops.quick_gelu(x)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(captured, reference(x))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_cuda_device_guard():
    """An input on cuda:1 runs on cuda:1 while cuda:0 is current."""
    x = torch.randn(1000, device="cuda:1")
    with torch.cuda.device(0):
        y = ops.quick_gelu(x)
        dx = ops.quick_gelu_backward(torch.ones_like(x), x)
    assert y.device == x.device and dx.device == x.device
    torch.testing.assert_close(y, reference(x))


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float64, *LOW_PRECISION])
def test_cuda_matches_cpu(dtype):
    x = torch.randn(1000, 37, dtype=dtype) * 4
    g = torch.randn_like(x)
    torch.testing.assert_close(ops.quick_gelu(x.cuda()).cpu(), ops.quick_gelu(x), **TOL[dtype])
    torch.testing.assert_close(ops.quick_gelu_backward(g.cuda(), x.cuda()).cpu(), ops.quick_gelu_backward(g, x),
                               **TOL[dtype])
