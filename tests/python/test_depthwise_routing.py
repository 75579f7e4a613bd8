"""Routed depthwise passes (kernels/common/depthwise_route.h): a pass handed to PyTorch's convolution plans once per
call, makes one PyTorch call for all the passes it hands over, copies its result into the promised layout only where
it is not in it already, and gives the values and gradients of customops' kernels. On the CPU through the
customops_backends test ops, which take the CUDA op's route with each pass's implementation given; on CUDA through
the op itself, its choice forced by the policy."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import customops
from conftest import requires_cuda

pytestmark = pytest.mark.torch_dependent

STATS = ("plans", "choices", "pytorch_calls", "layout_copies")
ALL_PYTORCH = ["pytorch"] * 3
MIXED = ["customops", "customops", "pytorch"]  # the CUDA rule's split of many layers: cuDNN's weight gradient


def stats(reset: bool = False) -> dict[str, int]:
    return dict(zip(STATS, torch.ops.customops_backends.depthwise_conv2d_route_stats(reset)))


def routed(x, w, b, stride, padding, passes):
    return torch.ops.customops_backends.depthwise_conv2d_routed(x, w, b, [stride] * 2, [padding] * 2, [1, 1], passes)


def routed_backward(g, x, w, stride, padding, mask, passes):
    return torch.ops.customops_backends.depthwise_conv2d_backward_routed(g, x, w, [stride] * 2, [padding] * 2,
                                                                         [1, 1], mask, passes)


def layer(channels_last: bool, c=8, k=3, batch=2, size=9, dtype=torch.float32, device="cpu"):
    """A depthwise nn.Conv2d's input, weight and bias as a model in that memory format holds them."""
    torch.manual_seed(0)
    conv = nn.Conv2d(c, c, k, padding=k // 2, groups=c).to(device, dtype)
    x = torch.randn(batch, c, size, size, device=device, dtype=dtype)
    if channels_last:
        conv, x = conv.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    return x, conv.weight.detach(), conv.bias.detach()


def promised(x: torch.Tensor) -> torch.memory_format:
    return torch.channels_last if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
        and not x.is_contiguous() else torch.contiguous_format


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_routed_forward_plans_once_and_copies_only_out_of_layout(channels_last):
    x, w, b = layer(channels_last)
    stats(reset=True)
    y = routed(x, w, b, 1, 1, ALL_PYTORCH)
    s = stats()
    assert (s["plans"], s["choices"], s["pytorch_calls"]) == (1, 1, 1), s
    # The layout customops promises (the Meta kernels' strides), copied into only where PyTorch's result is not in it.
    theirs = torch.ops.aten.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], x.shape[1])
    assert s["layout_copies"] == int(not theirs.is_contiguous(memory_format=promised(x))), s
    assert y.stride() == customops.depthwise_conv2d(x, w, b, padding=1).stride()
    torch.testing.assert_close(y, theirs)


def test_routed_forward_of_a_contiguous_input_copies_nothing():
    x, w, b = layer(channels_last=False)
    stats(reset=True)
    routed(x, w, b, 1, 1, ALL_PYTORCH)
    assert stats()["layout_copies"] == 0


@pytest.mark.parametrize("passes", [ALL_PYTORCH, MIXED], ids=["pytorch", "mixed"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_routed_backward_plans_once_and_makes_one_pytorch_call(channels_last, passes):
    x, w, _ = layer(channels_last)
    g = torch.randn_like(customops.depthwise_conv2d(x, w, padding=1))
    stats(reset=True)
    gi, gw, gb = routed_backward(g, x, w, 1, 1, [True, True, True], passes)
    s = stats()
    # One plan for the call (customops' passes here are the op's CPU kernel, whose own plan is not the route's),
    # one choice per pass, and PyTorch's passes in one convolution_backward, as nn.Conv2d's backward calls it.
    assert (s["plans"], s["choices"], s["pytorch_calls"]) == (1, 2, 1), s
    assert gi.stride() == x.stride() and gw.shape == w.shape and gb.shape == (x.shape[1],)
    theirs = torch.ops.aten.convolution_backward(g, x, w, [x.shape[1]], [1, 1], [1, 1], [1, 1], False, [0, 0],
                                                 x.shape[1], [True, True, True])
    copies = int(passes[1] == "pytorch" and not theirs[0].is_contiguous(memory_format=promised(x)))
    assert s["layout_copies"] == copies, s


def _reference(x, w, b, stride, padding, g):
    """Values and gradients of F.conv2d in float64."""
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    y = F.conv2d(xd, wd, bd, stride, padding, 1, x.shape[-3])
    y.backward(g.double())
    return y, xd.grad, wd.grad, bd.grad


@pytest.mark.parametrize("passes", [["customops"] * 3, ALL_PYTORCH, MIXED, ["pytorch", "pytorch", "customops"]],
                         ids=["customops", "pytorch", "mixed", "mixed2"])
@pytest.mark.parametrize("channels_last,stride,k,unbatched", [
    (False, 1, 3, False), (True, 1, 3, False), (True, 2, 5, False), (False, 2, 3, False), (False, 1, 5, True),
])
def test_routed_values_and_gradients_against_float64(passes, channels_last, stride, k, unbatched):
    x, w, b = layer(channels_last, c=12, k=k, batch=3, size=11)
    if unbatched:
        x = x[0]
    pad = k // 2
    y = routed(x, w, b, stride, pad, passes)
    g = torch.randn_like(y)
    ry, rgx, rgw, rgb = _reference(x, w, b, stride, pad, g)
    gx, gw, gb = routed_backward(g, x, w, stride, pad, [True, True, True], passes)
    for got, want in ((y, ry), (gx, rgx), (gw, rgw), (gb, rgb)):
        assert got.shape == want.shape and got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
    assert y.stride() == customops.depthwise_conv2d(x, w, b, stride=stride, padding=pad).stride()


COPIES = ("aten::contiguous", "aten::clone", "aten::copy_", "aten::_to_copy", "aten::to", "aten::reshape")


def _pytorch_calls(fn) -> list:
    """The ATen calls the routed test op made itself (its profiler event's direct children)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    (event,) = [e for e in prof.events() if e.name.startswith("customops_backends::")]
    return [(c.name, c.input_shapes) for c in event.cpu_children]


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_pytorch_gets_the_weight_as_nn_conv2d_gives_it(channels_last):
    # (C, 1, kh, kw) as the module holds it, not customops' (C, kh*kw) view of it nor a copy in another layout.
    x, w, b = layer(channels_last, c=8, k=5)
    g = torch.randn_like(customops.depthwise_conv2d(x, w, b, padding=2))  # the output's layout, as autograd's
    for fn, pytorch_op in ((lambda: routed(x, w, b, 1, 2, ALL_PYTORCH), "aten::convolution"),
                           (lambda: routed_backward(g, x, w, 1, 2, [True, True, True], ALL_PYTORCH),
                            "aten::convolution_backward"),
                           (lambda: routed_backward(g, x, w, 1, 2, [True, True, True], MIXED),
                            "aten::convolution_backward")):
        calls = _pytorch_calls(fn)
        assert not [name for name, _ in calls if name in COPIES], calls
        (shapes,) = [shapes for name, shapes in calls if name == pytorch_op]
        weight_shape = shapes[1] if pytorch_op == "aten::convolution" else shapes[2]
        assert weight_shape == list(w.shape) == [8, 1, 5, 5]


def test_routed_masks_leave_unasked_gradients_undefined():
    x, w, _ = layer(channels_last=True)
    g = torch.randn_like(customops.depthwise_conv2d(x, w, padding=1))
    for mask in ([True, False, False], [False, True, False], [False, False, True]):
        grads = routed_backward(g, x, w, 1, 1, mask, MIXED)
        assert [t is not None for t in grads] == mask


def test_routed_test_ops_check_the_passes():
    x, w, b = layer(channels_last=False)
    with pytest.raises(RuntimeError, match="'customops' or 'pytorch', got 'cudnn'"):
        routed(x, w, b, 1, 1, ["cudnn", "pytorch", "pytorch"])


@requires_cuda
@pytest.mark.parametrize("dtype,channels_last", [(torch.bfloat16, True), (torch.float32, False)],
                         ids=["bf16_channels_last", "float32_nchw"])
def test_cuda_routed_passes_plan_once_and_copy_nothing(dtype, channels_last):
    x, w, b = layer(channels_last, c=64, k=5, batch=4, size=14, dtype=dtype, device="cuda")
    x, wg = x.requires_grad_(), w.clone().requires_grad_()
    with customops.backends.use("depthwise_conv2d", "pytorch"):
        stats(reset=True)
        y = customops.depthwise_conv2d(x, wg, None, padding=2)
        g = torch.randn_like(y)
        y.backward(g)
        s = stats()
    # Forward and backward: one plan and one PyTorch call each (the backward's passes in one call), no copy: cuDNN
    # and PyTorch's native kernels return the input's layout.
    assert (s["plans"], s["choices"], s["pytorch_calls"], s["layout_copies"]) == (2, 3, 2, 0), s
    assert y.is_contiguous(memory_format=promised(x))
    ref = F.conv2d(x.detach(), w, None, 1, 2, 1, x.shape[1])
    torch.testing.assert_close(y, ref)
