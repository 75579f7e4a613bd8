"""conv2d and depthwise_conv2d: 2-D convolution (groups, any stride, padding including 'same', dilation) and its
one-filter-group-a-channel case with a channel multiplier."""

from __future__ import annotations

import torch
from hypothesis import strategies as st
from torch.testing import make_tensor

import customops
from fuzz_common import T, _image_for, _pair, _window, batched
from strategies import Case, _dtype, _mask, _pair_arg, _spatial, tensor_spec

from ._common import ErrorInput, OpInfo, SampleInput, _as_pair, _other_device, _placements

ops = torch.ops.customops


# (input shape, weight shape, bias, stride, padding, dilation, groups, name)
_CONVS = [
    ((2, 4, 9, 7), (6, 4, 3, 3), True, 1, 1, 1, 1, "3x3_pad1"),
    ((2, 4, 9, 7), (6, 2, 2, 3), True, (2, 3), (1, 0), (2, 1), 2, "asymmetric_groups"),
    ((3, 9, 8), (4, 3, 3, 2), False, 1, (0, 1), 1, 1, "unbatched_no_bias"),
    ((1, 2, 1, 1), (3, 2, 1, 1), True, 1, 0, 1, 1, "1x1_image"),
    ((2, 4, 6, 5), (8, 4, 1, 1), True, 1, 0, 1, 1, "pointwise"),
    ((2, 4, 6, 5), (4, 2, 1, 1), True, 1, 0, 1, 2, "pointwise_groups"),
    ((2, 2, 7, 7), (3, 2, 2, 2), True, 3, 0, 1, 1, "stride_gt_kernel"),
    ((2, 3, 5, 5), (2, 3, 5, 5), True, 1, 0, 1, 1, "output_1x1"),
    ((0, 3, 6, 6), (4, 3, 3, 3), True, 1, 1, 1, 1, "batch0"),
    ((1, 4, 13, 11), (4, 1, 3, 5), True, (2, 1), (2, 3), (2, 2), 4, "odd_sizes"),
    # A ResNet stem's shape (3 channels, 7x7, stride 2): the stem kernels on CUDA in the half types (NCHW through
    # the layout transposes, the windows overlapping).
    ((2, 3, 12, 12), (16, 3, 7, 7), True, 2, 3, 1, 1, "stem_7x7_s2"),
    # A huge dilation over a filter of one row is valid and changes nothing (found by test_fuzz.py, see _DEPTHWISE).
    ((1, 2, 5, 5), (2, 2, 1, 3), True, 1, (1, 1), (2**62, 1), 1, "one_row_filter_huge_dilation"),
    # A dilated filter axis over a one-pixel-wide input (found by test_properties.py's long profile, where the
    # reference, torch 2.11's oneDNN convolution in float16, crashed on it: see test_properties._without_onednn).
    ((3, 6, 2, 1), (6, 3, 1, 2), True, (3, 2), (2, 3), (1, 2), 2, "one_pixel_wide_dilated"),
]

# The same for depthwise_conv2d (groups = C; weight (C*m, 1, kh, kw)).
_DEPTHWISE = [
    ((2, 3, 9, 7), (3, 1, 3, 3), True, 1, 1, 1, "3x3_pad1"),
    ((2, 3, 9, 7), (6, 1, 2, 3), True, (2, 3), (1, 0), (2, 1), "multiplier_asymmetric"),
    ((3, 8, 6), (6, 1, 3, 2), False, 1, (0, 1), 1, "unbatched_no_bias"),
    ((1, 2, 1, 1), (2, 1, 1, 1), True, 1, 0, 1, "1x1_image"),
    ((2, 2, 7, 7), (4, 1, 2, 2), True, 3, 0, 1, "stride_gt_kernel"),
    ((2, 3, 5, 5), (3, 1, 5, 5), True, 1, 0, 1, "output_1x1"),
    ((0, 3, 6, 6), (3, 1, 3, 3), True, 1, 1, 1, "batch0"),
    ((1, 2, 13, 11), (6, 1, 3, 5), True, (2, 1), (2, 3), (2, 2), "odd_sizes"),
    # A square window at stride 2 both ways (CUDA: the input gradient by stride periods).
    ((2, 3, 11, 9), (3, 1, 5, 5), True, 2, 2, 1, "square_stride2"),
    ((1, 2, 10, 12), (2, 1, 3, 3), True, 1, 4, 1, "padding_gt_kernel"),
    ((1, 2, 23, 11), (4, 1, 3, 3), True, (2, 1), (1, 1), (3, 1), "row_stride_and_dilation"),
    ((1, 2, 17, 19), (4, 1, 3, 5), True, 1, (3, 4), (3, 2), "dilated_unit_stride"),
    ((2, 2, 20, 70), (4, 1, 7, 7), True, 1, 3, 1, "k7_several_tiles"),
    ((1, 2, 9, 8), (2, 1, 31, 31), True, 1, 15, 1, "k31"),
    # Enough channels for the CPU forward blocked over channels (kernels/core/depthwise_conv2d.h; ExecuTorch's
    # kernel too, which takes filters wider than 5x5): whole vectors, a ragged last vector without bias, strides
    # and dilation.
    ((2, 16, 9, 11), (16, 1, 3, 3), True, 1, 1, 1, "blocked_k3"),
    ((1, 13, 8, 19), (13, 1, 7, 5), False, 2, (3, 2), 1, "blocked_ragged_channels_no_bias"),
    ((2, 24, 12, 10), (24, 1, 3, 9), True, (2, 1), (1, 8), (1, 2), "blocked_strided_dilated"),
    # Found by test_fuzz.py: a huge dilation over a filter of one row is valid (it changes nothing), and overflowed
    # the CPU kernel's row arithmetic (heap corruption).
    ((1, 3, 2, 5), (6, 1, 1, 3), True, 1, (1, 2), (2**63 - 1, 2), "one_row_filter_huge_dilation"),
    # Also: a stride past the input (one output, SIGSEGV in the blocked CPU forward, whose extent multiplied it).
    ((3, 3, 5), (3, 1, 2, 1), True, 2**63 - 1, 0, 1, "unbatched_stride_past_the_input"),
]


# channels_last inputs: whole vectors of channels and ragged ones, every path
# of the NHWC kernels (unit stride, strides, dilation, multipliers, large taps).
_CHANNELS_LAST_DEPTHWISE = [
    ((2, 16, 9, 11), (16, 1, 3, 3), True, 1, 1, 1, "channels_last_k3"),
    ((2, 13, 8, 7), (13, 1, 3, 3), False, 1, 1, 1, "channels_last_k3_odd_channels"),
    ((2, 24, 10, 9), (24, 1, 7, 7), True, 1, 3, 1, "channels_last_k7"),
    ((2, 8, 11, 10), (16, 1, 5, 3), True, (2, 1), (2, 1), (1, 2), "channels_last_multiplier_strided"),
    ((1, 3, 7, 9), (9, 1, 3, 3), True, 2, 4, 2, "channels_last_multiplier3_padding_gt_kernel"),
    ((2, 8, 9, 8), (8, 1, 31, 31), True, 1, 15, 1, "channels_last_k31"),
    ((2, 12, 7, 6), (12, 1, 3, 3), True, 1, 1, 1, "channels_last_permuted"),
    # CUDA: the strided column kernels (the float forward; the weight gradient in every dtype)
    ((2, 8, 9, 11), (8, 1, 3, 3), True, 2, 1, 1, "channels_last_k3_stride2"),
    # CUDA: the column forward and input gradient in half types too (from 64 channels: 128 bytes a pixel)
    ((2, 64, 6, 5), (64, 1, 3, 3), True, 1, 1, 1, "channels_last_k3_64_channels"),
    # The NHWC kernels with a huge dilation over a filter of one column (found by test_fuzz.py, see _DEPTHWISE).
    ((2, 8, 5, 3), (8, 1, 3, 1), True, 1, (1, 0), (2, 2**62), "channels_last_one_column_filter_huge_dilation"),
]

_CHANNELS_LAST_CONVS = [
    ((2, 8, 9, 7), (6, 8, 3, 3), True, 1, 1, 1, 1, "channels_last_3x3"),
    ((2, 8, 9, 7), (8, 2, 3, 3), True, 2, 1, 1, 4, "channels_last_groups"),
    ((2, 8, 6, 5), (12, 8, 1, 1), False, 1, 0, 1, 1, "channels_last_permuted_pointwise"),
    # Channel counts the implicit-GEMM kernels take (multiples of 8): on sm_90 every generic test in float16 and
    # bfloat16 (and autocast) runs them; unit stride (forward and input gradient; the 3x3 weight gradients of
    # these few channels run the direct half-type kernel, on sm_80 and later) and strided (forward, and the weight
    # gradient of the 3x5 filter: more than 9 taps stay on CUTLASS's).
    ((2, 8, 9, 7), (16, 8, 3, 3), True, 1, 1, 1, 1, "channels_last_aligned_3x3"),
    ((1, 16, 11, 10), (8, 16, 3, 5), False, (2, 1), (1, 2), (1, 2), 1, "channels_last_aligned_strided_dilated"),
    # A model moved to channels_last has channels_last weights too (its weight gradient comes in that format); a
    # 1x1 unit-stride convolution of NHWC memory is one GEMM, on every device.
    ((2, 16, 7, 6), (24, 16, 3, 3), True, 1, 1, 1, 1, "channels_last_aligned_weight_cl"),
    ((2, 16, 5, 6), (8, 16, 1, 1), True, 1, 0, 1, 1, "channels_last_aligned_pointwise_weight_cl"),
    # Groups of 4 input and 8 output channels: the direct grouped kernels on CUDA (any GPU), strided so that the
    # input gradient's gather skips taps.
    ((2, 16, 9, 8), (32, 4, 3, 3), True, 2, 1, 1, 4, "channels_last_groups_of_4"),
    ((2, 3, 12, 12), (16, 3, 7, 7), True, 2, 3, 1, 1, "channels_last_stem_7x7_s2"),
]


def _conv_kwargs(stride, padding, dilation, groups=None):
    kw = {"stride": stride, "padding": padding, "dilation": dilation}
    if groups is not None:
        kw["groups"] = groups
    return kw


def _conv_samples_from(cases, depthwise):
    def samples(device, dtype, requires_grad):
        def t(shape, **kw):
            return make_tensor(shape, device=device, dtype=dtype, low=-1, high=1, requires_grad=requires_grad, **kw)

        for case in cases:
            (xs, ws, has_bias, stride, padding, dilation), rest = case[:6], case[6:]
            groups = None if depthwise else rest[0]
            bias = t((ws[0],)) if has_bias else None
            yield SampleInput((t(xs), t(ws), bias), _conv_kwargs(stride, padding, dilation, groups), rest[-1])
        xs, ws = (2, 4, 9, 7), ((8, 1, 3, 3) if depthwise else (6, 4, 3, 3))
        kw = _conv_kwargs(2, 1, 1, None if depthwise else 1)
        yield SampleInput((t(xs, noncontiguous=True), t(ws, noncontiguous=True), t((ws[0],), noncontiguous=True)),
                          kw, "noncontiguous")
        x = make_tensor(xs, device=device, dtype=dtype, low=-1, high=1).to(memory_format=torch.channels_last)
        yield SampleInput((x.requires_grad_(requires_grad), t(ws), t((ws[0],))), kw, "channels_last")
        for case in _CHANNELS_LAST_DEPTHWISE if depthwise else _CHANNELS_LAST_CONVS:
            (xs, ws, has_bias, stride, padding, dilation), rest = case[:6], case[6:]
            groups = None if depthwise else rest[0]
            x = make_tensor(xs, device=device, dtype=dtype, low=-1, high=1)
            # A permuted NHWC tensor (as ConvNeXt hands on) has channels_last strides too.
            x = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2) if "permuted" in rest[-1] else \
                x.to(memory_format=torch.channels_last)
            bias = t((ws[0],)) if has_bias else None
            weight = t(ws)
            if rest[-1].endswith("weight_cl"):
                weight = weight.detach().to(memory_format=torch.channels_last).requires_grad_(requires_grad)
            yield SampleInput((x.requires_grad_(requires_grad), weight, bias),
                              _conv_kwargs(stride, padding, dilation, groups), rest[-1])

    return samples


def _conv_autocast_samples(depthwise):
    """Under AMP: low-precision activations with float32 weight and bias, and a
    float32 input whose op must still run in the autocast dtype."""

    def samples(device, low, requires_grad):
        float_samples = list(_conv_samples_from(_DEPTHWISE if depthwise else _CONVS, depthwise)(
            device, torch.float32, requires_grad))
        for sample in float_samples:
            if sample.name not in ("3x3_pad1", "channels_last", "unbatched_no_bias", "batch0") and \
                    not sample.name.startswith(("channels_last_k", "channels_last_aligned")):
                continue
            x, w, b = sample.args
            low_x = x.detach().to(low).requires_grad_(requires_grad)
            yield SampleInput((low_x, w, b), sample.kwargs, f"{sample.name}_{low}_input")
            yield SampleInput(sample.args, sample.kwargs, f"{sample.name}_float32_input")

    return samples


def _conv_dynamic(depthwise):
    def samples(device, dtype):
        # Sizes chosen so that no two unrelated dimensions are equal in the first
        # sample (dynamo would give them one symbol).
        w = make_tensor((8, 1, 3, 5) if depthwise else (6, 4, 3, 5), device=device, dtype=dtype, low=-1, high=1)
        b = make_tensor((w.shape[0],), device=device, dtype=dtype, low=-1, high=1)
        kw = _conv_kwargs(1, (1, 2), 1, None if depthwise else 1)
        for n, h, wd in ((2, 9, 11), (3, 12, 10), (5, 14, 13)):
            x = make_tensor((n, 4, h, wd), device=device, dtype=dtype, low=-1, high=1)
            yield SampleInput((x, w, b), kw, f"n{n}_{h}x{wd}")

    return samples


def _conv_errors(depthwise):
    def errors(device):
        x = torch.randn(2, 4, 6, 6, device=device)
        w = torch.randn(8, 1, 3, 3, device=device) if depthwise else torch.randn(6, 4, 3, 3, device=device)
        b = torch.randn(w.shape[0], device=device)
        kw = _conv_kwargs(1, 1, 1, None if depthwise else 1)

        def bad(args, match, **over):
            return ErrorInput(SampleInput(args, {**kw, **over}), match)

        yield bad((x[0, 0], w, b), r"expected input to be a 3-D .* or 4-D .* got 2-D")
        yield bad((x, w[0], b), r"expected weight to be a 4-D")
        yield bad((x.long(), w, b), r"expected input to be a floating-point tensor")
        yield bad((x, w.double(), b), r"expected weight to have the dtype of input")
        yield bad((x, w, b.double()), r"expected bias to have the dtype of input")
        yield bad((x, w, b[:-1]), r"expected bias to be a 1-D tensor of %d elements" % w.shape[0])
        yield bad((x, torch.randn(w.shape[0], w.shape[1], 9, 3, device=device), b),
                  r"kernel .* is larger than the padded input")
        yield bad((x, w, b), r"expected stride to be positive", stride=0)
        yield bad((x, w, b), r"expected dilation to be positive", dilation=(1, 0))
        yield bad((x, w, b), r"expected padding to be non-negative", padding=-1)
        # The wrapper's own arguments (found by test_fuzz.py: AttributeError "'NoneType' object has no attribute
        # 'shape'", IndexError "list index out of range").
        yield ErrorInput(SampleInput((x, None, b), kw), r"expected weight to be a tensor, got NoneType",
                         error=TypeError)
        yield ErrorInput(SampleInput((x, w, b), {**kw, "padding": [1]}),
                         r"expected padding to be an int, a pair of ints, 'same' or 'valid', got \[1\]",
                         error=TypeError)
        yield bad((x, w, b), r"expected stride to have 2 elements \(height, width\), got 0", stride=[], padding="same")
        # Found by test_fuzz.py: a dilated extent that wrapped past int64 made a plausible output size (and an
        # allocation error naming nothing, or windows read past the input); a huge padding the same.
        yield bad((x, w, b), r"the kernel's extent dilation \* \(kernel_size - 1\) overflows int64",
                  dilation=(1, 2**62))
        yield bad((x, w, b), r"expected padding to be at most", padding=(2**62, 0))
        yield bad((x, w, b), r"the result's sizes .* \(from input, weight, padding, stride and dilation\) overflow",
                  padding=2**61)
        yield bad((x[:0], w, b), r"the result's sizes .* overflow int64", padding=(2**40, 2**40))
        # Found by test_fuzz.py: padding an expanded input for an asymmetric 'same' (even kernel) failed in F.pad's
        # stride computation, naming nothing.
        yield bad((x[:0, :, :1].expand(0, 4, 2**62, 6), w[..., :2, :2], b),
                  r"input padded for padding='same' to sizes .* overflows int64", padding="same")
        yield bad((torch.randn(2, 4, 0, 6, device=device), w, b), r"expected input to have non-empty C, H and W")
        if depthwise:
            yield bad((x, torch.randn(6, 1, 3, 3, device=device), b[:6]), r"expected weight of shape \(C\*m, 1, kh, kw\)")
            yield bad((x, torch.randn(8, 2, 3, 3, device=device), b), r"expected weight of shape \(C\*m, 1, kh, kw\)")
        else:
            yield bad((x, torch.randn(6, 3, 3, 3, device=device), b), r"expected weight's dimension 1 \(3\)")
            yield bad((x, torch.randn(6, 4, 3, 3, device=device), b), r"expected groups \(3\) to divide the input's",
                      groups=3)
            yield bad((x, torch.randn(5, 2, 3, 3, device=device), b[:5]),
                      r"expected groups \(2\) to divide weight's output channels", groups=2)
            yield bad((x, w, b), r"expected groups to be positive", groups=0)
        grad = torch.randn(2, w.shape[0], 5, 6, device=device)
        args = (grad, x, w, [1, 1], [1, 1], [1, 1]) + (() if depthwise else (1,)) + ([True, True, True],)
        yield ErrorInput(SampleInput(args), r"expected grad_out to have the output's shape", backward=True)
        other = _other_device(device)
        if other is not None:
            yield bad((x, w.to(other), b), r"expected weight and input on the same device")
            yield bad((x, w, b.to(other)), r"expected bias and input on the same device")

    return errors


def _conv_module(cls):
    def make(sample):
        x, w, b = sample.args
        kw = dict(sample.kwargs)
        m = cls(x.shape[-3], w.shape[0], tuple(w.shape[-2:]), bias=b is not None, device=x.device, dtype=x.dtype,
                **kw)
        with torch.no_grad():
            m.weight.copy_(w)
            if b is not None:
                m.bias.copy_(b)
        return m, (x.detach(),)

    return make


def _conv_backward_args(depthwise):
    def args(sample, grad):
        x, w, b = sample.args
        kw = sample.kwargs
        pair = lambda v: list(v) if isinstance(v, tuple) else [v, v]  # noqa: E731
        geometry = [pair(kw["stride"]), pair(kw["padding"]), pair(kw["dilation"])]
        groups = [] if depthwise else [kw["groups"]]
        return (grad, x, w, *geometry, *groups, [True, True, b is not None])

    return args


def _conv2d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """F.conv2d with arguments that change nothing normalised: the dilation of an axis of one tap set to 1, and a
    stride past the whole padded input lowered to just past it (one window either way): PyTorch's CUDA convolutions
    hold dilation and stride in 32 bits (2**62 gave wrong results or CUDNN_STATUS_NOT_SUPPORTED)."""
    d = list(dilation) if isinstance(dilation, (tuple, list)) else [dilation, dilation]
    d = [1 if w.shape[2 + i] == 1 else d[i] for i in range(2)]
    if not isinstance(padding, str):
        s = list(stride) if isinstance(stride, (tuple, list)) else [stride, stride]
        p = list(padding) if isinstance(padding, (tuple, list)) else [padding, padding]
        span = [x.shape[-2 + i] + 2 * p[i] - d[i] * (w.shape[2 + i] - 1) - 1 for i in range(2)]
        stride = [min(s[i], span[i] + 1) if span[i] >= 0 else s[i] for i in range(2)]
    return torch.nn.functional.conv2d(x, w, b, stride, padding, d, groups)


def _depthwise_ref(x, w, b=None, stride=1, padding=0, dilation=1):
    return _conv2d_ref(x, w, b, stride, padding, dilation, groups=x.shape[-3])


# Sums of many products: a little more room than elementwise ops.
_CONV_TOLERANCES = {
    torch.float64: (1e-10, 1e-12),
    torch.float32: (2e-5, 2e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}

# --- property cases ---------------------------------------------------------------------------------------------


@st.composite
def _conv_geometry(draw, kernel_sizes, max_stride=3, max_dilation=3, allow_same=True):
    """(kernel, stride, dilation, padding argument, [(top, bottom), (left, right)] padding) of a convolution."""
    k = (draw(kernel_sizes), draw(kernel_sizes))
    s = (draw(st.integers(1, max_stride)), draw(st.integers(1, max_stride)))
    big = max(k) > 7  # long filters: no dilation, or the images grow large
    d = (1, 1) if big else (draw(st.integers(1, max_dilation)), draw(st.integers(1, max_dilation)))
    choices = ["ints", "pair", "valid"] + (["same"] if allow_same and s == (1, 1) else [])
    kind = draw(st.sampled_from(choices))
    if kind == "same":
        sides = [(d[i] * (k[i] - 1) // 2, d[i] * (k[i] - 1) - d[i] * (k[i] - 1) // 2) for i in range(2)]
        return k, s, d, "same", sides
    if kind == "valid":
        return k, s, d, "valid", [(0, 0), (0, 0)]
    most = max(3, max(k) // 2)
    p = (draw(st.integers(0, most)), draw(st.integers(0, most)))
    arg = p[0] if kind == "ints" and p[0] == p[1] else p
    return k, s, d, arg, [(p[0], p[0]), (p[1], p[1])]


@st.composite
def _conv_image(draw, c, k, d, sides, batches=(2, 1, 3, None, 0), extra=6):
    h = draw(_spatial(k[0], d[0], sum(sides[0]), extra))
    w = draw(_spatial(k[1], d[1], sum(sides[1]), extra))
    batch = draw(st.sampled_from(batches))
    return (c, h, w) if batch is None else (batch, c, h, w)


@st.composite
def _conv2d_cases(draw, device):
    groups = draw(st.integers(1, 3))
    c, o = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    k, s, d, padding, sides = draw(_conv_geometry(st.integers(1, 5)))
    shape = draw(_conv_image(c, k, d, sides))
    x = draw(tensor_spec(shape))
    w = draw(tensor_spec((o, c // groups) + k))
    b = draw(st.none() | tensor_spec((o,)))
    kw = {"stride": _pair_arg(draw, s), "padding": padding, "dilation": _pair_arg(draw, d), "groups": groups}
    return Case("conv2d", (x, w, b), kw, draw(_dtype(device)), mask=_mask(draw, 3, b is not None),
                grad_seed=draw(st.integers(0, 2**31 - 1)))


@st.composite
def _depthwise_conv2d_cases(draw, device):
    # From 6 channels (3 in float64) the CPU forward of one filter a channel runs blocked over channels.
    c, m = draw(st.one_of(st.integers(1, 4), st.sampled_from([6, 8, 13, 16]))), draw(st.integers(1, 3))
    sizes = st.one_of(st.integers(1, 5), st.sampled_from([7, 9, 31]))
    k, s, d, padding, sides = draw(_conv_geometry(sizes))
    shape = draw(_conv_image(c, k, d, sides))
    x = draw(tensor_spec(shape))
    w = draw(tensor_spec((c * m, 1) + k))
    b = draw(st.none() | tensor_spec((c * m,)))
    kw = {"stride": _pair_arg(draw, s), "padding": padding, "dilation": _pair_arg(draw, d)}
    return Case("depthwise_conv2d", (x, w, b), kw, draw(_dtype(device)), mask=_mask(draw, 3, b is not None),
                grad_seed=draw(st.integers(0, 2**31 - 1)))


# --- fuzz calls ---------------------------------------------------------------------------------------------------


def _conv_fuzz_call(depthwise):
    def call(rng, backward, device, dtype):
        f = lambda shape: T(shape, dtype, device)  # noqa: E731
        batch = batched(rng)
        _, d, p, s = _window(rng)
        k = _pair(rng, 1, 3)
        shape, (oh, ow) = _image_for(rng, k, d, p, s, batch)
        c = shape[-3]
        if depthwise:
            groups, o = c, c * rng.randint(1, 2)
            wshape = [o, 1] + k
        else:
            groups = rng.choice([g for g in (1, 2, 3) if c % g == 0])
            o = groups * rng.randint(1, 2)
            wshape = [o, c // groups] + k
        out = shape[:-3] + [o, oh, ow]
        tail = [s, p, d] + ([] if depthwise else [groups])
        if backward:
            return [f(out), f(shape), f(wshape)] + tail + [[rng.random() < 0.7 for _ in range(3)]]
        return [f(shape), f(wshape), f([o]) if rng.random() < 0.7 else None] + tail

    return call


# The Python wrappers take padding as a string too, beside the schema's ints.
_PADDING_STRINGS = ["same", "valid", "full", "SAME", ""]


def _conv_fuzz_wrapper_args(rng, args):
    if rng.random() < 0.4:
        args[4] = rng.choice(_PADDING_STRINGS)


# --- ONNX nodes ---------------------------------------------------------------------------------------------------


def _conv_attrs(sample: SampleInput, groups: int) -> dict:
    """The sample's window attributes, where a stride past the last window (one output either way) is the
    distance to it and a one-tap kernel's dilation is 1: the op takes any int64, runtimes hold 32 bits."""
    kw = sample.kwargs
    x, w = sample.args[0], sample.args[1]
    strides, dilations = _as_pair(kw["stride"]), _as_pair(kw["dilation"])
    pads = _as_pair(kw["padding"])
    for i in range(2):
        kernel, size = w.shape[2 + i], x.shape[x.dim() - 2 + i]
        if kernel == 1:
            dilations[i] = 1
        last_start = size + 2 * pads[i] - dilations[i] * (kernel - 1) - 1
        if 0 <= last_start < strides[i]:
            strides[i] = last_start + 1
    return {"group": groups, "strides": strides, "dilations": dilations, "pads": pads * 2}


# --- sharding cases -----------------------------------------------------------------------------------------------


def _conv2d_sharding(rnd):
    Shard, R, P = _placements()
    x = rnd(4, 6, 9, 8)
    w, b = rnd(8, 6, 3, 3), rnd(8)
    conv = (x, w, b, [1, 1], [1, 1], [1, 1], 1)
    conv_nb = (x, w, None, [2, 1], [1, 0], [1, 1], 1)
    yield "conv2d batch", ops.conv2d.default, conv, [Shard(0), R, R], [Shard(0)]
    yield "conv2d out channels", ops.conv2d.default, conv, [R, Shard(0), Shard(0)], [Shard(1)]
    yield "conv2d in channels", ops.conv2d.default, conv_nb, [Shard(1), Shard(1)], [P]
    yield "conv2d partial", ops.conv2d.default, conv_nb, [P, R], [P]
    # Grouped: no channel rule (the local op would need groups / 2); DTensor gathers the channels first.
    conv_g = (x, rnd(8, 3, 3, 3), rnd(8), [1, 1], [1, 1], [1, 1], 2)
    yield "conv2d groups batch", ops.conv2d.default, conv_g, [Shard(0), R, R], [Shard(0)]
    go = rnd(4, 8, 9, 8)
    bwd = (go, x, w, [1, 1], [1, 1], [1, 1], 1, [True, True, True])
    yield "conv2d_backward batch", ops.conv2d_backward.default, bwd, [Shard(0), Shard(0), R], [Shard(0), P, P]
    yield ("conv2d_backward out channels", ops.conv2d_backward.default, bwd, [Shard(1), R, Shard(0)],
           [P, Shard(0), Shard(0)])
    yield ("conv2d_backward in channels", ops.conv2d_backward.default, bwd, [R, Shard(1), Shard(1)],
           [Shard(1), Shard(1), R])
    bwd_mask = (go, x, w, [1, 1], [1, 1], [1, 1], 1, [True, False, False])
    yield "conv2d_backward masked", ops.conv2d_backward.default, bwd_mask, [Shard(0), Shard(0), R], [Shard(0)]
    bwd_g = (go, x, conv_g[1], [1, 1], [1, 1], [1, 1], 2, [False, True, True])
    yield "conv2d_backward groups batch", ops.conv2d_backward.default, bwd_g, [Shard(0), Shard(0), R], [P, P]
    unbatched = (x[0], w, b, [1, 1], [1, 1], [1, 1], 1)
    yield "conv2d unbatched out channels", ops.conv2d.default, unbatched, [R, Shard(0), Shard(0)], [Shard(0)]


def _depthwise_conv2d_sharding(rnd):
    Shard, R, P = _placements()
    x = rnd(4, 6, 9, 8)
    dw, db = rnd(12, 1, 3, 3), rnd(12)  # channel multiplier 2
    dconv = (x, dw, db, [2, 2], [1, 1], [1, 1])
    yield "depthwise batch", ops.depthwise_conv2d.default, dconv, [Shard(0), R, R], [Shard(0)]
    yield "depthwise channels", ops.depthwise_conv2d.default, dconv, [Shard(1), Shard(0), Shard(0)], [Shard(1)]
    yield "depthwise partial", ops.depthwise_conv2d.default, (x, dw, None, [1, 1], [1, 1], [1, 1]), [P, R], [P]
    yield ("depthwise unbatched channels", ops.depthwise_conv2d.default, (x[0], dw, db, [1, 1], [1, 1], [1, 1]),
           [Shard(0), Shard(0), Shard(0)], [Shard(0)])
    dgo = rnd(4, 12, 5, 4)
    dbwd = (dgo, x, dw, [2, 2], [1, 1], [1, 1], [True, True, True])
    yield ("depthwise_backward batch", ops.depthwise_conv2d_backward.default, dbwd, [Shard(0), Shard(0), R],
           [Shard(0), P, P])
    yield ("depthwise_backward channels", ops.depthwise_conv2d_backward.default, dbwd, [Shard(1), Shard(1), Shard(0)],
           [Shard(1), Shard(0), Shard(0)])


CONV2D = OpInfo(
    name="conv2d",
    op=customops.conv2d,
    ref=_conv2d_ref,
    sample_inputs=_conv_samples_from(_CONVS, depthwise=False),
    dynamic_samples=_conv_dynamic(depthwise=False),
    error_inputs=_conv_errors(depthwise=False),
    module=_conv_module(customops.Conv2d),
    backward_args=_conv_backward_args(depthwise=False),
    tolerances=dict(_CONV_TOLERANCES),
    autocast="lower_precision",
    autocast_samples=_conv_autocast_samples(depthwise=False),
    keeps_memory_format=True,
    takes_image=True,
    # The explicit path's matrix products are cuBLAS's, whose reductions may differ between streams and between
    # host threads (each gets a handle of its own).
    cuda_concurrent_bitwise=False,
    cases=_conv2d_cases,
    property_cost=1.0,
    fuzz_call=_conv_fuzz_call(depthwise=False),
    fuzz_wrapper_args=_conv_fuzz_wrapper_args,
    onnx_nodes=lambda s: [("Conv", _conv_attrs(s, s.kwargs["groups"]))],
    sharding_cases=_conv2d_sharding,
)

DEPTHWISE_CONV2D = OpInfo(
    name="depthwise_conv2d",
    op=customops.depthwise_conv2d,
    ref=_depthwise_ref,
    sample_inputs=_conv_samples_from(_DEPTHWISE, depthwise=True),
    dynamic_samples=_conv_dynamic(depthwise=True),
    error_inputs=_conv_errors(depthwise=True),
    module=_conv_module(customops.DepthwiseConv2d),
    backward_args=_conv_backward_args(depthwise=True),
    tolerances=dict(_CONV_TOLERANCES),
    autocast="lower_precision",
    autocast_samples=_conv_autocast_samples(depthwise=True),
    keeps_memory_format=True,
    takes_image=True,
    cases=_depthwise_conv2d_cases,
    property_cost=1.0,
    fuzz_call=_conv_fuzz_call(depthwise=True),
    fuzz_wrapper_args=_conv_fuzz_wrapper_args,
    onnx_nodes=lambda s: [("Conv", _conv_attrs(s, s.args[0].shape[-3]))],
    sharding_cases=_depthwise_conv2d_sharding,
)

OPS = [CONV2D, DEPTHWISE_CONV2D]
