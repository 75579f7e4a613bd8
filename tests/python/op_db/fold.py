"""im2col and col2im: an image's sliding windows as columns (F.unfold), and their sum back into an image
(F.fold)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from torch.testing import make_tensor

import customops
from fuzz_common import T, _image_for, _window, batched
from strategies import Case, _dtype, _pair_arg, _spatial, tensor_spec

from ._common import ErrorInput, OpInfo, SampleInput, _as_pair, _low_precision_first_input, _placements

ops = torch.ops.customops


# (image shape, kernel_size, dilation, padding, stride, name)
_WINDOWS = [
    ((2, 3, 9, 7), (3, 3), (1, 1), (1, 1), (1, 1), "3x3_pad1"),
    ((2, 3, 9, 7), (2, 3), (2, 1), (1, 0), (2, 3), "asymmetric_dilated"),
    ((3, 8, 6), (3, 2), (1, 1), (0, 1), (1, 2), "unbatched"),
    ((1, 2, 1, 1), (1, 1), (1, 1), (0, 0), (1, 1), "1x1_image"),
    ((2, 2, 7, 7), (2, 2), (1, 1), (0, 0), (3, 3), "stride_gt_kernel"),
    ((2, 2, 5, 5), (5, 5), (1, 1), (0, 0), (1, 1), "output_1x1"),
    ((0, 3, 6, 6), (3, 3), (1, 1), (1, 1), (1, 1), "batch0"),
    ((1, 4, 13, 11), (3, 5), (2, 2), (2, 3), (2, 1), "odd_sizes"),
]


def _window_args(k, d, p, s):
    return {"kernel_size": k, "dilation": d, "padding": p, "stride": s}


def _im2col_samples(device, dtype, requires_grad):
    for shape, k, d, p, s, name in _WINDOWS:
        x = make_tensor(shape, device=device, dtype=dtype, low=-4, high=4, requires_grad=requires_grad)
        yield SampleInput((x,), _window_args(k, d, p, s), name)
    x = make_tensor((2, 3, 9, 7), device=device, dtype=dtype, low=-4, high=4, noncontiguous=True)
    yield SampleInput((x.requires_grad_(requires_grad),), _window_args(3, 1, 1, 1), "noncontiguous")
    x = make_tensor((2, 3, 9, 7), device=device, dtype=dtype, low=-4, high=4).to(memory_format=torch.channels_last)
    yield SampleInput((x.requires_grad_(requires_grad),), _window_args(3, 1, 1, 2), "channels_last")


def _col2im_samples(device, dtype, requires_grad):
    for sample in _im2col_samples(device, dtype, False):
        image = sample.args[0]
        cols = torch.nn.functional.unfold(image.float(), **sample.kwargs) if image.dim() == 4 else \
            torch.nn.functional.unfold(image.float().unsqueeze(0), **sample.kwargs)[0]
        c = make_tensor(cols.shape, device=device, dtype=dtype, low=-4, high=4)
        if sample.name == "noncontiguous":
            c = make_tensor(cols.shape, device=device, dtype=dtype, low=-4, high=4, noncontiguous=True)
        yield SampleInput((c.requires_grad_(requires_grad), tuple(image.shape[-2:])), sample.kwargs, sample.name)


def _im2col_dynamic(device, dtype):
    # No size 1 and no equal sizes: either would specialise the compiled graph.
    for shape in ((2, 3, 8, 10), (4, 3, 11, 9), (3, 3, 16, 12)):
        yield SampleInput((make_tensor(shape, device=device, dtype=dtype, low=-4, high=4),),
                          _window_args(3, 1, 1, 2), f"{shape}")


def _col2im_dynamic(device, dtype):
    for sample in _im2col_dynamic(device, dtype):
        image = sample.args[0]
        cols = torch.nn.functional.unfold(image, **sample.kwargs)
        yield SampleInput((torch.randn_like(cols), tuple(image.shape[-2:])), sample.kwargs, sample.name)


def _im2col_errors(device):
    x = torch.randn(2, 3, 5, 5, device=device)
    ok = _window_args(3, 1, 1, 1)
    yield ErrorInput(SampleInput((x[0, 0],), ok), r"expected input to be a 3-D .* or 4-D .* got 2-D")
    yield ErrorInput(SampleInput((x.long(),), ok), r"expected input to be a floating-point tensor")
    yield ErrorInput(SampleInput((x,), _window_args(7, 1, 0, 1)), r"kernel .* is larger than the padded input")
    yield ErrorInput(SampleInput((x,), _window_args(3, 4, 1, 1)), r"kernel .* is larger than the padded input")
    yield ErrorInput(SampleInput((x,), _window_args(3, 1, 1, 0)), r"expected stride to be positive")
    yield ErrorInput(SampleInput((x,), _window_args(3, 0, 1, 1)), r"expected dilation to be positive")
    yield ErrorInput(SampleInput((x,), _window_args(3, 1, -1, 1)), r"expected padding to be non-negative")
    yield ErrorInput(SampleInput((x,), _window_args((0, 3), 1, 1, 1)), r"expected kernel_size to be positive")
    # The wrapper's own arguments (found by test_fuzz.py: "'NoneType' object is not iterable" named nothing).
    yield ErrorInput(SampleInput((x,), _window_args(3, None, 1, 1)),
                     r"customops.im2col: expected dilation to be an int or a pair of ints, got None", error=TypeError)
    yield ErrorInput(SampleInput((torch.randn(2, 3, 0, 5, device=device),), ok),
                     r"expected input to have non-empty C, H and W")
    # Window arguments whose arithmetic overflows int64 (found by test_fuzz.py): the product and the dilated extent
    # of kernel_size, twice the padding, and the number of windows of a huge padding.
    yield ErrorInput(SampleInput((x,), _window_args((2**62, 4), 1, 0, 1)),
                     r"customops::im2col: the product of kernel_size \[4611686018427387904, 4\] overflows int64")
    yield ErrorInput(SampleInput((x,), _window_args(3, (1, 2**62), 1, 1)),
                     r"the kernel's extent dilation \* \(kernel_size - 1\) overflows int64")
    yield ErrorInput(SampleInput((x,), _window_args(3, 1, (0, 2**62), 1)), r"expected padding to be at most")
    yield ErrorInput(SampleInput((x,), _window_args(1, 1, 2**61, 1)),
                     r"the number of kernel windows .* overflows int64 \(from the input's size, padding")
    cols = torch.randn(2, 27, 25, device=device)
    # The backward ops' messages name the backward op's own arguments.
    yield ErrorInput(SampleInput((cols, (4, 4), 3, 1, 1, 1)),
                     r"customops::im2col_backward: expected grad_out's last dimension to be 16", backward=True)
    yield ErrorInput(SampleInput((cols[:, :26], (5, 5), 3, 1, 1, 1)), r"multiple of kernel_size's product",
                     backward=True)
    yield ErrorInput(SampleInput((cols, (5, 0), 3, 1, 1, 1)), r"expected input_size to be positive", backward=True)
    # Was SIGFPE: kernel_size's product wrapped to 0 and divided the rows.
    yield ErrorInput(SampleInput((torch.randn(1, 6, 3, device=device), [2, 2], [2**62, 6917529027641081856],
                                  [2, 2], [1, 2], [2, 1])),
                     r"customops::im2col_backward: the kernel's extent dilation \* \(kernel_size - 1\) overflows",
                     backward=True)
    # A size below -2^62 is a SymInt the dispatcher cannot make an int64_t: checked before, by name.
    yield ErrorInput(SampleInput((cols, (-2**63, 5), 3, 1, 1, 1)), r"expected input_size to be positive",
                     backward=True)


def _col2im_errors(device):
    cols = torch.randn(2, 27, 25, device=device)
    ok = _window_args(3, 1, 1, 1)
    yield ErrorInput(SampleInput((cols[0, 0], (5, 5)), ok), r"expected input to be a 2-D .* or 3-D .* got 1-D")
    yield ErrorInput(SampleInput((cols.long(), (5, 5)), ok), r"expected input to be a floating-point tensor")
    yield ErrorInput(SampleInput((cols[:, :26], (5, 5)), ok), r"multiple of kernel_size's product \(9\)")
    yield ErrorInput(SampleInput((cols, (6, 5)), ok), r"expected input's last dimension to be 30")
    yield ErrorInput(SampleInput((cols, (0, 5)), ok), r"expected output_size to be positive")
    yield ErrorInput(SampleInput((cols, (1, 1)), _window_args(3, 1, 0, 1)), r"larger than the padded input")
    yield ErrorInput(SampleInput((cols, (5, 5)), _window_args(3, 1, 1, 0)), r"expected stride to be positive")
    # Was SIGFPE: kernel_size's product overflowed int64 to 0, then divided the rows.
    yield ErrorInput(SampleInput((torch.randn(3, 8, 5, device=device), (5, 5)), _window_args((2**62, 4), 1, 0, 1)),
                     r"customops::col2im: the product of kernel_size \[4611686018427387904, 4\] overflows int64")
    yield ErrorInput(SampleInput((torch.randn(12, 2, device=device), (3, 2)),
                                 _window_args((2**63 - 1, 1), 2**40, 1, 2)),
                     r"the kernel's extent dilation \* \(kernel_size - 1\) overflows int64")
    yield ErrorInput(SampleInput((cols, (2**62, 2**62)), _window_args(1, 1, 0, 1)),
                     r"the number of kernel windows .* overflows int64")
    yield ErrorInput(SampleInput((cols, (-2**63, 5)), ok), r"expected output_size to be positive")
    # Was a signed overflow (UBSan, found by test_fuzz.py): 2^63 - 1 window positions at stride 1, plus one.
    yield ErrorInput(SampleInput((torch.randn(0, 8, 8, device=device), (4, 2**63 - 1)),
                                 _window_args(2, (2, 1), (2, 1), (3, 1))),
                     r"customops::col2im: the number of window positions along the width .* overflows int64")
    yield ErrorInput(SampleInput((torch.randn(2, 3, 5, 5, device=device).long(), 3, 1, 1, 1)),
                     r"customops::col2im_backward: expected grad_out to be a floating-point tensor", backward=True)
    yield ErrorInput(SampleInput((torch.randn(2, 3, 5, 5, device=device), [2**62, 4], 1, 0, 1)),
                     r"customops::col2im_backward: the product of kernel_size", backward=True)


def _module_from(cls):
    def make(sample):
        return cls(*sample.args[1:], **sample.kwargs), sample.args[:1]

    return make


def _unbatched_ref(fn):
    """F.unfold/F.fold on an unbatched input, through a batch of one."""

    def ref(x, *args, **kwargs):
        unbatched = x.dim() == (3 if fn is torch.nn.functional.unfold else 2)
        out = fn(x.unsqueeze(0) if unbatched else x, *args, **kwargs)
        return out[0] if unbatched else out

    return ref


# --- property cases ---------------------------------------------------------------------------------------------


@st.composite
def _window_strategy(draw, max_k=4):
    k = (draw(st.integers(1, max_k)), draw(st.integers(1, max_k)))
    d = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    p = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    s = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return k, d, p, s


@st.composite
def _image_geometry(draw):
    k, d, p, s = draw(_window_strategy())
    h = draw(_spatial(k[0], d[0], 2 * p[0]))
    w = draw(_spatial(k[1], d[1], 2 * p[1]))
    batch = draw(st.sampled_from([2, 1, 3, None, 0]))  # hypothesis favours the first: a plain batch
    c = draw(st.integers(1, 4))
    shape = (c, h, w) if batch is None else (batch, c, h, w)
    kw = {"kernel_size": _pair_arg(draw, k), "dilation": _pair_arg(draw, d), "padding": _pair_arg(draw, p),
          "stride": _pair_arg(draw, s)}
    return shape, (k, d, p, s), kw


@st.composite
def _im2col_cases(draw, device):
    shape, _, kw = draw(_image_geometry())
    x = draw(tensor_spec(shape, -4, 4))
    return Case("im2col", (x,), kw, draw(_dtype(device)), grad_seed=draw(st.integers(0, 2**31 - 1)))


@st.composite
def _col2im_cases(draw, device):
    shape, (k, d, p, s), kw = draw(_image_geometry())
    out = [(shape[-2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    cols = shape[:-3] + (shape[-3] * k[0] * k[1], out[0] * out[1])
    c = draw(tensor_spec(cols, -4, 4))
    size = shape[-2:]
    size = size[0] if size[0] == size[1] and draw(st.booleans()) else size
    return Case("col2im", (c, size), kw, draw(_dtype(device)), grad_seed=draw(st.integers(0, 2**31 - 1)))


# --- fuzz calls, ONNX nodes, sharding cases ----------------------------------------------------------------------


def _fold_fuzz_call(image_first):
    """Valid calls of im2col and col2im_backward (image_first: an image or its gradient, and the window), or of
    col2im and im2col_backward (columns or their gradient, the image size, and the window)."""

    def call(rng, backward, device, dtype):
        batch = batched(rng)
        k, d, p, s = _window(rng)
        shape, (oh, ow) = _image_for(rng, k, d, p, s, batch)
        cols = shape[:-3] + [shape[-3] * k[0] * k[1], oh * ow]
        if image_first != backward:
            return [T(shape, dtype, device), k, d, p, s]
        return [T(cols, dtype, device), shape[-2:], k, d, p, s]

    return call


def _col2im_onnx_nodes(sample):
    kw = sample.kwargs
    return [("Col2Im", {"strides": _as_pair(kw["stride"]), "dilations": _as_pair(kw["dilation"]),
                        "pads": _as_pair(kw["padding"]) * 2})]


_SHARDING_WINDOW = ([3, 3], [1, 1], [1, 1], [2, 2])  # kernel, dilation, padding, stride


def _im2col_sharding(rnd):
    Shard, _, P = _placements()
    win = _SHARDING_WINDOW
    img = rnd(4, 6, 9, 8)
    cols = ops.im2col.default(img, *win)
    yield "im2col batch", ops.im2col.default, (img, *win), [Shard(0)], [Shard(0)]
    yield "im2col channels", ops.im2col.default, (img, *win), [Shard(1)], [Shard(1)]
    yield "im2col partial", ops.im2col.default, (img, *win), [P], [P]
    yield "im2col unbatched channels", ops.im2col.default, (img[0], *win), [Shard(0)], [Shard(0)]
    for pl in (Shard(0), Shard(1), P):
        yield f"im2col_backward {pl}", ops.im2col_backward.default, (cols, [9, 8], *win), [pl], [pl]


def _col2im_sharding(rnd):
    Shard, _, P = _placements()
    win = _SHARDING_WINDOW
    img = rnd(4, 6, 9, 8)
    cols = ops.im2col.default(img, *win)
    yield "col2im batch", ops.col2im.default, (cols, [9, 8], *win), [Shard(0)], [Shard(0)]
    yield "col2im channels", ops.col2im.default, (cols, [9, 8], *win), [Shard(1)], [Shard(1)]
    yield "col2im partial", ops.col2im.default, (cols, [9, 8], *win), [P], [P]
    for pl in (Shard(0), Shard(1), P):
        yield f"col2im_backward {pl}", ops.col2im_backward.default, (img, *win), [pl], [pl]


IM2COL = OpInfo(
    name="im2col",
    op=customops.im2col,
    ref=_unbatched_ref(torch.nn.functional.unfold),
    sample_inputs=_im2col_samples,
    dynamic_samples=_im2col_dynamic,
    error_inputs=_im2col_errors,
    module=_module_from(customops.Im2col),
    backward_args=lambda sample, grad: (grad, tuple(sample.args[0].shape[-2:]), *(
        sample.kwargs[k] for k in ("kernel_size", "dilation", "padding", "stride"))),
    autocast_samples=_low_precision_first_input(_im2col_samples),
    takes_image=True,
    cases=_im2col_cases,
    property_cost=1.0,
    fuzz_call=_fold_fuzz_call(image_first=True),
    onnx_nodes=lambda s: [("Gather", {"axis": 2}), ("Gather", {"axis": 4})],
    sharding_cases=_im2col_sharding,
)

COL2IM = OpInfo(
    name="col2im",
    op=customops.col2im,
    ref=_unbatched_ref(torch.nn.functional.fold),
    sample_inputs=_col2im_samples,
    dynamic_samples=_col2im_dynamic,
    error_inputs=_col2im_errors,
    module=_module_from(customops.Col2im),
    backward_args=lambda sample, grad: (grad, *(sample.kwargs[k] for k in ("kernel_size", "dilation", "padding",
                                                                            "stride"))),
    autocast_samples=_low_precision_first_input(_col2im_samples),
    # Through ONNX it is Col2Im, of opset 18, past the 17 at which onnx2tf keeps resize modes; litert-torch
    # makes it a scatter-add, which TF-Lite's kernels refuse.
    converts_to_tflite=False,
    cases=_col2im_cases,
    property_cost=1.0,
    fuzz_call=_fold_fuzz_call(image_first=False),
    onnx_nodes=_col2im_onnx_nodes,
    sharding_cases=_col2im_sharding,
)

OPS = [IM2COL, COL2IM]
