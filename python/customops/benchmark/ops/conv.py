"""conv2d and depthwise_conv2d against F.conv2d (cuDNN) and ATen's backward, with and without TF32."""

from __future__ import annotations

from typing import Callable, Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo, State
from ..timing import tf32


def _with_tf32(fn: Callable[[State], object], cudnn: bool, matmul: bool) -> Callable[[State], object]:
    def call(s: State) -> object:
        with tf32(cudnn, matmul):
            return fn(s)

    return call


def _conv_setup(x_shape, w_shape, device, dtype):
    def setup():
        x = torch.randn(x_shape, device=device, dtype=dtype)
        w = torch.randn(w_shape, device=device, dtype=dtype) / (w_shape[1] * w_shape[2] * w_shape[3]) ** 0.5
        y = torch.nn.functional.conv2d(x, w, None, 1, w_shape[-1] // 2, 1, x_shape[1] // w_shape[1])
        return {"x": x, "w": w, "g": torch.randn_like(y)}

    return setup


def _aten_backward(groups: int, padding: int) -> Callable[[State], object]:
    """PyTorch's own convolution backward (cuDNN or native), input and weight grads."""
    return lambda s: torch.ops.aten.convolution_backward(s["g"], s["x"], s["w"], None, [1, 1], [padding] * 2,
                                                         [1, 1], False, [0, 0], groups, [True, True, False])


def _conv2d_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        x_shape, c = ((8 if quick else 32), 256, 56, 56), 256
        dtypes = (torch.float32, torch.float16)
    else:
        x_shape, c = ((2 if quick else 8), 64, 28, 28), 64
        dtypes = (torch.float32,)
    w_shape = (c, c, 3, 3)
    label = f"{'x'.join(map(str, x_shape))} k3 {c}->{c}"
    for dtype in dtypes:
        setup = _conv_setup(x_shape, w_shape, device, dtype)
        element = torch.empty((), dtype=dtype).element_size()
        io = 2 * torch.Size(x_shape).numel() * element  # read x, write y
        fwd = lambda s: customops.conv2d(s["x"], s["w"], None, 1, 1)  # noqa: E731
        cudnn = lambda s: torch.nn.functional.conv2d(s["x"], s["w"], None, 1, 1)  # noqa: E731
        bwd = lambda s: torch.ops.customops.conv2d_backward(  # noqa: E731
            s["g"], s["x"], s["w"], [1, 1], [1, 1], [1, 1], 1, [True, True, False])
        if device.type == "cuda" and dtype == torch.float32:
            strict = {"F.conv2d no-tf32": _with_tf32(cudnn, False, False)}
            yield Case("conv2d", f"forward {label}", dtype, setup, _with_tf32(fwd, False, False), strict, io)
            yield Case("conv2d", f"backward {label}", dtype, setup, _with_tf32(bwd, False, False),
                       {"aten no-tf32": _with_tf32(_aten_backward(1, 1), False, False)}, 2 * io)
            yield Case("conv2d", f"forward tf32 {label}", dtype, setup, _with_tf32(fwd, True, True),
                       {"F.conv2d tf32": _with_tf32(cudnn, True, True)}, io)
            yield Case("conv2d", f"backward tf32 {label}", dtype, setup, _with_tf32(bwd, True, True),
                       {"aten tf32": _with_tf32(_aten_backward(1, 1), True, True)}, 2 * io)
        else:
            yield Case("conv2d", f"forward {label}", dtype, setup, fwd, {"F.conv2d": cudnn}, io)
            yield Case("conv2d", f"backward {label}", dtype, setup, bwd, {"aten": _aten_backward(1, 1)}, 2 * io)


def _depthwise_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        x_shape, kernels = ((4 if quick else 32), 384, 56, 56), (3, 7, 15, 31)
    else:
        x_shape, kernels = ((2 if quick else 8), 128, 56, 56), (3, 7)
    c = x_shape[1]
    for k in kernels:
        setup = _conv_setup(x_shape, (c, 1, k, k), device, torch.float32)
        numel = torch.Size(x_shape).numel()
        label = f"{'x'.join(map(str, x_shape))} k{k}"
        yield Case("depthwise_conv2d", f"forward {label}", torch.float32, setup,
                   ours=lambda s, k=k: customops.depthwise_conv2d(s["x"], s["w"], None, 1, k // 2),
                   pytorch={"F.conv2d": lambda s, k=k: torch.nn.functional.conv2d(s["x"], s["w"], None, 1, k // 2,
                                                                                  1, c)},
                   bytes=2 * numel * 4)  # read x, write y
        yield Case("depthwise_conv2d", f"backward {label}", torch.float32, setup,
                   ours=lambda s, k=k: torch.ops.customops.depthwise_conv2d_backward(
                       s["g"], s["x"], s["w"], [1, 1], [k // 2] * 2, [1, 1], [True, True, False]),
                   pytorch={"aten": _aten_backward(c, k // 2)},
                   bytes=3 * numel * 4)  # read grad_out and x, write grad_input
    yield from _depthwise_channels_last_cases(device, quick)


# Channels_last blocks of two networks, against cuDNN's channels_last kernels
# (F.conv2d(groups=C) on channels_last tensors): (name, channels, kernel size,
# image size, stride). MobileNetV2's stride-2 block is where a gathering input
# gradient spends its time finding the taps that read each pixel.
_DEPTHWISE_NHWC = (("mobilenet", 144, 3, 56, 1), ("mobilenet s2", 96, 3, 112, 2), ("convnext", 96, 7, 56, 1))


def _depthwise_same(stride: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return lambda x, w: customops.depthwise_conv2d(x, w, None, stride, w.shape[-1] // 2)


def _cudnn_depthwise_same(stride: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return lambda x, w: torch.nn.functional.conv2d(x, w, None, stride, w.shape[-1] // 2, 1, x.shape[1])


def _forward_of(conv) -> Callable[[State], object]:
    return lambda s: conv(s["x"].detach(), s["w"].detach())


def _fwd_bwd_of(conv) -> Callable[[State], object]:
    """y = conv(x, w), then the input and weight gradients for the upstream g."""
    return lambda s: torch.autograd.grad(conv(s["x"], s["w"]), (s["x"], s["w"]), s["g"])


def _depthwise_channels_last_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    # On the CPU, bfloat16 is autocast's dtype (float16 convolutions there are rare and slow in PyTorch).
    dtypes = (torch.float16, torch.float32) if device.type == "cuda" else (torch.bfloat16, torch.float32)
    batch = 64 if device.type == "cuda" else 8
    for name, c, k, hw, stride in _DEPTHWISE_NHWC:
        x_shape = ((2 if quick else batch), c, hw, hw)
        out_hw = (hw - 1) // stride + 1  # padding k // 2
        y_shape = (x_shape[0], c, out_hw, out_hw)
        label = f"{name} {'x'.join(map(str, x_shape))} k{k}{f' s{stride}' if stride > 1 else ''} channels_last"
        for dtype in dtypes:
            def setup(dtype=dtype, x_shape=x_shape, y_shape=y_shape, k=k):
                x = torch.randn(x_shape, device=device, dtype=dtype).to(memory_format=torch.channels_last)
                w = torch.randn(x_shape[1], 1, k, k, device=device, dtype=dtype) / k
                g = torch.randn(y_shape, device=device, dtype=dtype).to(memory_format=torch.channels_last)
                return {"x": x.requires_grad_(), "w": w.requires_grad_(), "g": g}

            itemsize = torch.empty((), dtype=dtype).element_size()
            size, out_size = torch.Size(x_shape).numel() * itemsize, torch.Size(y_shape).numel() * itemsize
            yield Case("depthwise_conv2d", f"forward {label}", dtype, setup, _forward_of(_depthwise_same(stride)),
                       {"F.conv2d": _forward_of(_cudnn_depthwise_same(stride))},
                       bytes=size + out_size)  # read x, write y
            yield Case("depthwise_conv2d", f"fwd+bwd {label}", dtype, setup, _fwd_bwd_of(_depthwise_same(stride)),
                       {"F.conv2d": _fwd_bwd_of(_cudnn_depthwise_same(stride))},
                       bytes=3 * size + 2 * out_size)  # forward: x, y; backward: g, x, grad_input


def _conv2d_demo(device: torch.device) -> Demo:
    torch.manual_seed(0)
    m = customops.Conv2d(8, 16, 3, padding=1, stride=2, groups=2).to(device)
    return Demo(m, (torch.randn(2, 8, 17, 15, device=device),),
                lambda x: torch.nn.functional.conv2d(x, m.weight.to(x.dtype), m.bias.to(x.dtype), 2, 1, 1, 2))


def _depthwise_demo(device: torch.device) -> Demo:
    torch.manual_seed(0)
    m = customops.DepthwiseConv2d(8, 16, 7, padding=3).to(device)
    return Demo(m, (torch.randn(2, 8, 33, 31, device=device),),
                lambda x: torch.nn.functional.conv2d(x, m.weight.to(x.dtype), m.bias.to(x.dtype), 1, 3, 1, 8))


BENCH_OPS = [
    BenchOp('conv2d', _conv2d_cases, _conv2d_demo),
    BenchOp('depthwise_conv2d', _depthwise_cases, _depthwise_demo),
]
