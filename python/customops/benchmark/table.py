"""The benchmark table: one BenchOp per operator.

Each case gives a setup (inputs on a device), our call, the plain-PyTorch calls
it replaces (eager and torch.compile'd), and the fewest bytes the work must move
through memory, from which the achieved share of copy bandwidth follows. The
demo (python -m customops.demo) uses `demo` of each entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import nn

import customops

from .timing import tf32

State = dict


@dataclass
class Case:
    op: str
    name: str
    dtype: torch.dtype
    setup: Callable[[], State]
    ours: Callable[[State], object]
    pytorch: dict[str, Callable[[State], object]]  # baseline name -> call
    bytes: int  # fewest bytes moved through memory


@dataclass
class Demo:
    module: nn.Module  # scriptable, calls the op
    inputs: tuple
    reference: Callable[..., torch.Tensor]  # plain PyTorch, same signature


@dataclass
class BenchOp:
    name: str
    cases: Callable[[torch.device, bool], Iterator[Case]]  # (device, quick)
    demo: Callable[[torch.device], Demo]


def _grad_of(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[State], object]:
    """forward + backward: y = fn(x); dL/dx for the upstream gradient g."""
    return lambda s: torch.autograd.grad(fn(s["x"]), s["x"], s["g"])


# --- quick_gelu ---------------------------------------------------------------


def quick_gelu_reference(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


_compiled_quick_gelu_reference = torch.compile(quick_gelu_reference, dynamic=False)


def _quick_gelu_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        n = (4 if quick else 64) * 2**20
        dtypes = (torch.float32, torch.float16, torch.bfloat16)
    else:
        n = (1 if quick else 4) * 2**20
        dtypes = (torch.float32,)
    for dtype in dtypes:
        size = n * torch.empty((), dtype=dtype).element_size()

        def setup(dtype=dtype):
            x = torch.randn(n, device=device, dtype=dtype, requires_grad=True)
            return {"x": x, "g": torch.randn_like(x)}

        label = f"n={n // 2**20}M"
        yield Case("quick_gelu", f"forward {label}", dtype, setup,
                   ours=lambda s: customops.quick_gelu(s["x"].detach()),
                   pytorch={"eager": lambda s: quick_gelu_reference(s["x"].detach()),
                            "compile": lambda s: _compiled_quick_gelu_reference(s["x"].detach())},
                   bytes=2 * size)  # read x, write y
        yield Case("quick_gelu", f"fwd+bwd {label}", dtype, setup,
                   ours=_grad_of(customops.quick_gelu),
                   pytorch={"eager": _grad_of(quick_gelu_reference),
                            "compile": _grad_of(_compiled_quick_gelu_reference)},
                   bytes=5 * size)  # forward: x, y; backward: g, x, dx


def _quick_gelu_demo(device: torch.device) -> Demo:
    return Demo(customops.QuickGELU(), (torch.randn(64, 1024, device=device) * 4,), quick_gelu_reference)


# --- im2col / col2im ------------------------------------------------------------

_WINDOW = {"kernel_size": 3, "padding": 1, "stride": 1, "dilation": 1}


def _image_shape(device: torch.device, quick: bool) -> tuple:
    if device.type == "cuda":
        return (8 if quick else 32, 64, 56, 56)
    return (2 if quick else 8, 32, 56, 56)


def _fold_dtypes(device: torch.device) -> tuple:
    return (torch.float32, torch.float16) if device.type == "cuda" else (torch.float32,)


def _im2col_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shape = _image_shape(device, quick)
    for dtype in _fold_dtypes(device):
        def setup(dtype=dtype):
            return {"x": torch.randn(shape, device=device, dtype=dtype)}

        element = torch.empty((), dtype=dtype).element_size()
        numel = torch.Size(shape).numel()
        yield Case("im2col", f"{'x'.join(map(str, shape))} k3 p1", dtype, setup,
                   ours=lambda s: customops.im2col(s["x"], **_WINDOW),
                   pytorch={"eager": lambda s: torch.nn.functional.unfold(s["x"], **_WINDOW)},
                   bytes=(1 + 9) * numel * element)  # read the image once, write 9 columns per pixel


def _col2im_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shape = _image_shape(device, quick)
    n, c, h, w = shape
    for dtype in _fold_dtypes(device):
        def setup(dtype=dtype):
            return {"cols": torch.randn(n, c * 9, h * w, device=device, dtype=dtype)}

        element = torch.empty((), dtype=dtype).element_size()
        yield Case("col2im", f"{'x'.join(map(str, shape))} k3 p1", dtype, setup,
                   ours=lambda s: customops.col2im(s["cols"], (h, w), **_WINDOW),
                   pytorch={"eager": lambda s: torch.nn.functional.fold(s["cols"], (h, w), **_WINDOW)},
                   bytes=(9 + 1) * n * c * h * w * element)  # read the columns, write the image


def _im2col_demo(device: torch.device) -> Demo:
    return Demo(customops.Im2col(3, padding=1, stride=2), (torch.randn(2, 8, 17, 15, device=device),),
                lambda x: torch.nn.functional.unfold(x, 3, padding=1, stride=2))


def _col2im_demo(device: torch.device) -> Demo:
    return Demo(customops.Col2im((17, 15), 3, padding=1, stride=2), (torch.randn(2, 72, 72, device=device),),
                lambda c: torch.nn.functional.fold(c, (17, 15), 3, padding=1, stride=2))


# --- conv2d / depthwise_conv2d ----------------------------------------------------


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


# --- upsample_bilinear2d --------------------------------------------------------


def _upsample_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        shape = ((4 if quick else 16), 64, 128, 128)
        dtypes = (torch.float32, torch.float16)
    else:
        shape = ((2 if quick else 8), 32, 64, 64)
        dtypes = (torch.float32,)
    size = [2 * shape[2], 2 * shape[3]]
    label = f"x2 {'x'.join(map(str, shape))}"
    for dtype in dtypes:
        def setup(dtype=dtype):
            x = torch.randn(shape, device=device, dtype=dtype)
            return {"x": x, "g": torch.randn(*shape[:2], *size, device=device, dtype=dtype)}

        numel = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
        yield Case("upsample_bilinear2d", f"forward {label}", dtype, setup,
                   ours=lambda s: customops.upsample_bilinear2d(s["x"], size),
                   pytorch={"F.interpolate": lambda s: torch.nn.functional.interpolate(
                       s["x"], size=size, mode="bilinear", align_corners=False)},
                   bytes=5 * numel)  # read x, write 4x as many outputs
        yield Case("upsample_bilinear2d", f"backward {label}", dtype, setup,
                   ours=lambda s: torch.ops.customops.upsample_bilinear2d_backward(s["g"], shape[2:], "half_pixel"),
                   pytorch={"aten": lambda s: torch.ops.aten.upsample_bilinear2d_backward(
                       s["g"], size, list(shape), False)},
                   bytes=5 * numel)  # read grad_out, write grad_input


def _upsample_demo(device: torch.device) -> Demo:
    m = customops.UpsampleBilinear2d(size=(37, 29))
    return Demo(m, (torch.randn(2, 8, 16, 12, device=device),),
                lambda x: torch.nn.functional.interpolate(x, size=(37, 29), mode="bilinear", align_corners=False))


# --- trilinear_interpolation -------------------------------------------------------


def trilinear_reference(feats: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """The NeRF formula in plain PyTorch (what customops replaces)."""
    u, v, w = ((points + 1) / 2).unbind(-1)
    u, v, w = u[:, None], v[:, None], w[:, None]
    a, b, c, d = (1 - v) * (1 - w), (1 - v) * w, v * (1 - w), v * w
    f = feats.unbind(1)
    return (1 - u) * (a * f[0] + b * f[1] + c * f[2] + d * f[3]) + u * (a * f[4] + b * f[5] + c * f[6] + d * f[7])


_compiled_trilinear_reference = torch.compile(trilinear_reference, dynamic=False)


def _retained_grad(key: str) -> Callable[[State], object]:
    """Backward alone: the gradients of an output computed once in setup."""
    return lambda s: torch.autograd.grad(s[key], (s["f"], s["p"]), s["g"], retain_graph=True)


def _trilinear_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    if device.type == "cuda":
        sizes = ((8192, 256), (2**17, 32)) if quick else ((65536, 256), (2**20, 32))
    else:
        sizes = ((4096, 64),)
    for n, f in sizes:
        def setup(n=n, f=f):
            feats = torch.randn(n, 8, f, device=device, requires_grad=True)
            points = (torch.rand(n, 3, device=device) * 2 - 1).requires_grad_()
            state = {"f": feats, "p": points, "g": torch.randn(n, f, device=device)}
            state["ours"] = customops.trilinear_interpolation(feats, points)
            state["eager"] = trilinear_reference(feats, points)
            state["compile"] = _compiled_trilinear_reference(feats, points)
            return state

        label = f"N={n} F={f}"
        yield Case("trilinear_interpolation", f"forward {label}", torch.float32, setup,
                   ours=lambda s: customops.trilinear_interpolation(s["f"].detach(), s["p"].detach()),
                   pytorch={"eager": lambda s: trilinear_reference(s["f"].detach(), s["p"].detach()),
                            "compile": lambda s: _compiled_trilinear_reference(s["f"].detach(), s["p"].detach())},
                   bytes=4 * (9 * n * f + 3 * n))  # read feats and points, write out
        yield Case("trilinear_interpolation", f"backward {label}", torch.float32, setup,
                   ours=_retained_grad("ours"),
                   pytorch={"eager": _retained_grad("eager"), "compile": _retained_grad("compile")},
                   bytes=4 * (17 * n * f + 6 * n))  # read grad, feats, points; write both gradients


def _trilinear_demo(device: torch.device) -> Demo:
    torch.manual_seed(0)
    return Demo(customops.TrilinearInterpolation(),
                (torch.randn(4096, 8, 16, device=device), torch.rand(4096, 3, device=device) * 2 - 1),
                trilinear_reference)


TABLE: list[BenchOp] = [
    BenchOp("quick_gelu", _quick_gelu_cases, _quick_gelu_demo),
    BenchOp("im2col", _im2col_cases, _im2col_demo),
    BenchOp("col2im", _col2im_cases, _col2im_demo),
    BenchOp("conv2d", _conv2d_cases, _conv2d_demo),
    BenchOp("depthwise_conv2d", _depthwise_cases, _depthwise_demo),
    BenchOp("upsample_bilinear2d", _upsample_cases, _upsample_demo),
    BenchOp("trilinear_interpolation", _trilinear_cases, _trilinear_demo),
]
