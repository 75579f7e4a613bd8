"""The operator table: one OpInfo per customops operator.

Adding an operator to the tests means adding one entry to OP_DB; every generic
test in test_ops.py then runs over it. Each entry gives:

- ``op``: the customops functional; ``ref``: the same maths in plain PyTorch,
- ``sample_inputs(device, dtype, requires_grad)``: inputs that must match the
  reference (include empty, non-contiguous and odd sizes),
- ``dynamic_samples(device, dtype)``: inputs of one structure in several sizes,
  for torch.compile(dynamic=True),
- ``error_inputs(device)``: bad inputs and the message they must raise,
- ``module(sample)``: a scriptable/exportable nn.Module and the tensors to call
  it with,
- dtypes per device and tolerances per dtype,
- ``autocast``: what torch.autocast does to the op, as to its PyTorch
  counterpart: "lower_precision" (runs in the autocast dtype) or "input_dtype"
  (runs in its first tensor's dtype); ``autocast_samples(device, low_dtype,
  requires_grad)``: mixed-precision inputs beside the float32 samples (low-precision
  activations with float32 parameters, as under AMP),
- ``keeps_memory_format``: a channels_last input gives channels_last results
  (output and input gradient), as PyTorch's counterpart does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch import nn
from torch.testing import make_tensor

import customops

FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

# (rtol, atol) against a float64 reference evaluated on the same rounded inputs.
DEFAULT_TOLERANCES = {
    torch.float64: (1e-10, 1e-12),
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


@dataclass
class SampleInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""

    def tensors(self) -> list[torch.Tensor]:
        return [a for a in self.args if isinstance(a, torch.Tensor)]


@dataclass
class ErrorInput:
    sample: SampleInput
    match: str  # regex the RuntimeError's message must match
    error: type = RuntimeError
    backward: bool = False  # the sample is for the op's registered <name>_backward


@dataclass
class OpInfo:
    name: str  # torch.ops.customops.<name>
    op: Callable
    ref: Callable
    sample_inputs: Callable[[torch.device, torch.dtype, bool], Iterable[SampleInput]]
    dynamic_samples: Callable[[torch.device, torch.dtype], Iterable[SampleInput]]
    error_inputs: Callable[[torch.device], Iterable[ErrorInput]]
    module: Callable[[SampleInput], tuple[nn.Module, tuple]]
    # Arguments of <name>_backward for a forward sample and a gradient of its output.
    backward_args: Callable[[SampleInput, torch.Tensor], tuple]
    dtypes: dict[str, tuple] = field(default_factory=lambda: {"cpu": FLOATING, "cuda": FLOATING})
    tolerances: dict = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    supports_gradgrad: bool = True
    autocast: str = "input_dtype"
    autocast_samples: Callable[[torch.device, torch.dtype, bool], Iterable[SampleInput]] = lambda *_: ()
    keeps_memory_format: bool = False

    @property
    def overload(self) -> Any:
        return getattr(torch.ops.customops, self.name).default

    @property
    def backward_overload(self) -> Any:
        return getattr(torch.ops.customops, self.name + "_backward").default

    def __str__(self) -> str:  # pytest ids
        return self.name


def _other_device(device) -> str | None:
    """A device other than `device` for mixed-device error inputs, if there is one."""
    if torch.device(device).type == "cuda":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None


class SideBySide(nn.Module):
    """The modules of several samples side by side (``op.module(sample)`` for each): forward takes all their
    inputs, returns one output each. One export or conversion then covers all of an op's samples."""

    def __init__(self, built: list) -> None:
        super().__init__()
        self.parts = nn.ModuleList(module.eval() for module, _ in built)
        self.arities = [len(args) for _, args in built]

    def forward(self, *inputs):
        outputs, i = [], 0
        for part, n in zip(self.parts, self.arities):
            outputs.append(part(*inputs[i:i + n]))
            i += n
        return tuple(outputs)


# --- quick_gelu ---------------------------------------------------------------


def _quick_gelu_ref(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def _quick_gelu_samples(device, dtype, requires_grad):
    def t(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=-8, high=8, requires_grad=requires_grad, **kw)

    yield SampleInput((t(()),), name="scalar")
    yield SampleInput((t((0,)),), name="empty")
    yield SampleInput((t((5, 0, 3)),), name="empty_3d")
    yield SampleInput((t((1,)),), name="one")
    yield SampleInput((t((7,)),), name="odd")
    yield SampleInput((t((3, 5)),), name="matrix")
    yield SampleInput((t((4, 6, 5), noncontiguous=True),), name="noncontiguous")
    yield SampleInput((t((9, 11)).t(),), name="transposed")
    yield SampleInput((t((2, 3, 5, 7)).to(memory_format=torch.channels_last),), name="channels_last")
    base = make_tensor((12, 9), device=device, dtype=dtype, low=-8, high=8)
    yield SampleInput((base[1:, 1:].detach().requires_grad_(requires_grad),), name="offset_slice")
    yield SampleInput((t((1, 7)).expand(3, 7),), name="expanded")
    # Many threads' worth on CPU, many blocks on CUDA, with a ragged tail.
    yield SampleInput((t((70001,)),), name="large_odd")
    large = torch.tensor([-1e4, -200.0, -90.0, -30.0, 30.0, 90.0, 200.0, 1e4], dtype=torch.float64)
    large = large.clamp(torch.finfo(dtype).min, torch.finfo(dtype).max).to(device, dtype)
    yield SampleInput((large.requires_grad_(requires_grad),), name="large_magnitude")


def _quick_gelu_dynamic(device, dtype):
    for n in (5, 17, 1000):
        yield SampleInput((make_tensor((n, 3), device=device, dtype=dtype, low=-4, high=4),), name=f"n{n}")


def _quick_gelu_errors(device):
    yield ErrorInput(SampleInput((torch.ones(3, dtype=torch.int64, device=device),)),
                     r"expected x to be a floating-point tensor .* got Long")
    yield ErrorInput(SampleInput((torch.ones(3, dtype=torch.bool, device=device),)),
                     r"expected x to be a floating-point tensor .* got Bool")
    x = torch.randn(4, 3, device=device)
    yield ErrorInput(SampleInput((torch.randn(3, 4, device=device), x)),
                     r"expected grad_out to have the shape of x", backward=True)
    yield ErrorInput(SampleInput((x.double(), x)), r"expected grad_out to have the dtype of x", backward=True)
    yield ErrorInput(SampleInput((x.long(), x)), r"expected grad_out to be a floating-point tensor",
                     backward=True)
    yield ErrorInput(SampleInput((x, x.long())), r"expected x to be a floating-point tensor", backward=True)
    # Found by test_fuzz.py: None for a tensor failed in autograd's bookkeeping ("tensor does not have a device"),
    # and an expanded tensor too large to make dense failed in at::empty; neither message named the argument.
    yield ErrorInput(SampleInput((x, None)), r"quick_gelu_backward: expected x to be a tensor, got None",
                     backward=True)
    yield ErrorInput(SampleInput((torch.zeros(1, dtype=torch.float16, device=device).expand(2**62),)),
                     r"quick_gelu: x of sizes \[4611686018427387904\] has more elements than a dense tensor can hold")
    other = _other_device(device)
    if other is not None:
        yield ErrorInput(SampleInput((x.to(other), x)), r"expected grad_out and x on the same device",
                         backward=True)


def _quick_gelu_module(sample):
    return customops.QuickGELU(), sample.args


def _low_precision_first_input(make_samples, count=3):
    """The first `count` samples with their first tensor in the low dtype."""

    def samples(device, low, requires_grad):
        for sample in list(make_samples(device, low, requires_grad))[:count]:
            yield SampleInput(sample.args, sample.kwargs, f"{sample.name}_{low}")

    return samples


QUICK_GELU = OpInfo(
    name="quick_gelu",
    op=customops.quick_gelu,
    ref=_quick_gelu_ref,
    sample_inputs=_quick_gelu_samples,
    dynamic_samples=_quick_gelu_dynamic,
    error_inputs=_quick_gelu_errors,
    module=_quick_gelu_module,
    backward_args=lambda sample, grad: (grad, sample.args[0]),
    autocast_samples=_low_precision_first_input(_quick_gelu_samples, 11),
    keeps_memory_format=True,
)



# --- im2col / col2im ----------------------------------------------------------

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
)


# --- conv2d / depthwise_conv2d --------------------------------------------------

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
    ((1, 2, 10, 12), (2, 1, 3, 3), True, 1, 4, 1, "padding_gt_kernel"),
    ((1, 2, 23, 11), (4, 1, 3, 3), True, (2, 1), (1, 1), (3, 1), "row_stride_and_dilation"),
    ((1, 2, 17, 19), (4, 1, 3, 5), True, 1, (3, 4), (3, 2), "dilated_unit_stride"),
    ((2, 2, 20, 70), (4, 1, 7, 7), True, 1, 3, 1, "k7_several_tiles"),
    ((1, 2, 9, 8), (2, 1, 31, 31), True, 1, 15, 1, "k31"),
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
)

# --- upsample_bilinear2d ----------------------------------------------------------

# (input shape, output size, coordinate_mode, name)
_RESIZES = [
    ((2, 3, 5, 7), (10, 14), "half_pixel", "x2_half_pixel"),
    ((2, 3, 9, 11), (4, 5), "half_pixel", "down_non_integer_half_pixel"),
    ((1, 2, 6, 5), (9, 13), "align_corners", "up_non_integer_align_corners"),
    ((1, 2, 6, 5), (3, 2), "align_corners", "down_align_corners"),
    ((2, 2, 5, 4), (10, 8), "asymmetric", "x2_asymmetric"),
    ((2, 2, 9, 7), (4, 3), "asymmetric", "down_asymmetric"),
    ((1, 2, 4, 6), (7, 5), "asymmetric", "mixed_asymmetric"),
    ((1, 1, 1, 1), (1, 1), "half_pixel", "1x1"),
    ((2, 3, 1, 1), (3, 4), "align_corners", "from_1x1"),
    ((2, 3, 4, 3), (1, 1), "half_pixel", "to_1x1_half_pixel"),
    ((2, 3, 4, 3), (1, 1), "align_corners", "to_1x1_align_corners"),
    ((2, 3, 4, 3), (1, 1), "asymmetric", "to_1x1_asymmetric"),
    ((2, 2, 6, 5), (6, 5), "half_pixel", "same_size"),
    ((0, 3, 4, 4), (8, 8), "half_pixel", "batch0"),
    ((1, 2, 3, 2), (29, 23), "half_pixel", "large_factor"),  # > 8 readers per input pixel
    ((1, 2, 37, 45), (74, 90), "half_pixel", "multi_tile"),
]


def _resize_ref(input, output_size, coordinate_mode="half_pixel"):
    """Plain PyTorch: F.interpolate for its two conventions, the ONNX formula
    written out with gathers for asymmetric (which PyTorch lacks)."""
    if coordinate_mode != "asymmetric":
        return torch.nn.functional.interpolate(input, size=output_size, mode="bilinear",
                                               align_corners=coordinate_mode == "align_corners")

    def taps(n_in, n_out):
        src = torch.arange(n_out, dtype=torch.float64, device=input.device) * (n_in / n_out)
        i0 = src.floor().long().clamp(max=n_in - 1)
        i1 = (i0 + 1).clamp(max=n_in - 1)
        lam = (src - i0).clamp(0, 1).to(input.dtype)
        return i0, i1, lam

    y0, y1, ly = taps(input.shape[-2], output_size[0])
    x0, x1, lx = taps(input.shape[-1], output_size[1])
    rows = input[..., y0, :] * (1 - ly)[:, None] + input[..., y1, :] * ly[:, None]
    return rows[..., x0] * (1 - lx) + rows[..., x1] * lx


def _resize_samples(device, dtype, requires_grad):
    def t(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=-4, high=4, requires_grad=requires_grad, **kw)

    for shape, size, mode, name in _RESIZES:
        yield SampleInput((t(shape),), {"output_size": size, "coordinate_mode": mode}, name)
    yield SampleInput((t((2, 3, 6, 7), noncontiguous=True),), {"output_size": (11, 5), "coordinate_mode": "asymmetric"},
                      "noncontiguous")
    x = make_tensor((2, 5, 6, 7), device=device, dtype=dtype, low=-4, high=4).to(memory_format=torch.channels_last)
    for mode in ("half_pixel", "asymmetric"):
        yield SampleInput((x.detach().requires_grad_(requires_grad),), {"output_size": (12, 9), "coordinate_mode": mode},
                          f"channels_last_{mode}")
    x = make_tensor((2, 8, 5, 4), device=device, dtype=dtype, low=-4, high=4).to(memory_format=torch.channels_last)
    yield SampleInput((x.requires_grad_(requires_grad),), {"output_size": (3, 9), "coordinate_mode": "align_corners"},
                      "channels_last_vectorised")


def _resize_dynamic(device, dtype):
    # A fixed output size from inputs of several sizes (scale_factor, whose
    # sizes are symbolic too, has its own test in test_interpolation.py).
    for shape in ((2, 3, 8, 10), (4, 3, 11, 9), (5, 3, 16, 12)):
        yield SampleInput((make_tensor(shape, device=device, dtype=dtype, low=-4, high=4),),
                          {"output_size": (13, 7), "coordinate_mode": "half_pixel"}, f"{shape}")


def _resize_errors(device):
    x = torch.randn(2, 3, 5, 5, device=device)
    ok = {"output_size": (8, 8)}
    yield ErrorInput(SampleInput((x[0],), ok), r"expected input to be a 4-D \(N, C, H, W\) tensor, got 3-D")
    yield ErrorInput(SampleInput((x.long(),), ok), r"expected input to be a floating-point tensor")
    yield ErrorInput(SampleInput((x,), {"output_size": (8, 8), "coordinate_mode": "nearest"}),
                     r"unknown coordinate_mode 'nearest'; expected one of half_pixel, align_corners, asymmetric")
    yield ErrorInput(SampleInput((x,), {"output_size": (0, 4)}), r"expected output_size to be positive")
    yield ErrorInput(SampleInput((x,), {"scale_factor": 0.1}), r"expected output_size to be positive")
    yield ErrorInput(SampleInput((torch.randn(2, 3, 0, 5, device=device),), ok),
                     r"expected input to have non-empty H and W")
    yield ErrorInput(SampleInput((x,), {}), r"give output_size or scale_factor", error=ValueError)
    yield ErrorInput(SampleInput((x,), {"output_size": 1.5}), r"expected output_size to be an int or a pair of ints",
                     error=TypeError)
    yield ErrorInput(SampleInput((x[0], [4, 4], "half_pixel")), r"expected grad_out to be a 4-D", backward=True)
    yield ErrorInput(SampleInput((x, [4, -1], "half_pixel")), r"expected input_size to be positive", backward=True)
    yield ErrorInput(SampleInput((x, [4, 4], "bicubic")), r"unknown coordinate_mode 'bicubic'", backward=True)
    # Found by test_fuzz.py: sizes whose result overflows int64 (at::empty's message named no argument), and sizes
    # below -2^62, SymInts the dispatcher could not hand to the kernels as int64_t (the same).
    yield ErrorInput(SampleInput((x,), {"output_size": (2**62, 2**62)}),
                     r"the result's sizes \[2, 3, 4611686018427387904, 4611686018427387904\] \(from output_size\)")
    yield ErrorInput(SampleInput((x[:0],), {"output_size": (2**62, 5)}), r"\(from output_size\) overflow int64")
    yield ErrorInput(SampleInput((x,), {"output_size": (-2**63, 4)}), r"expected output_size to be positive")
    yield ErrorInput(SampleInput((x, [4, -2**63], "half_pixel")), r"expected input_size to be positive", backward=True)
    yield ErrorInput(SampleInput((x, [2**62, 2**62], "half_pixel")), r"\(from input_size\) overflow int64",
                     backward=True)


def _resize_module(sample):
    kw = sample.kwargs
    return customops.UpsampleBilinear2d(size=kw["output_size"], coordinate_mode=kw["coordinate_mode"]), sample.args


# Source coordinates are computed in float for float32 and the half types, as
# PyTorch does, so blend weights differ from the float64 reference by ~1e-7.
_RESIZE_TOLERANCES = {
    torch.float64: (1e-10, 1e-12),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 4e-3),
    torch.bfloat16: (1.6e-2, 3e-2),
}

UPSAMPLE_BILINEAR2D = OpInfo(
    name="upsample_bilinear2d",
    op=customops.upsample_bilinear2d,
    ref=_resize_ref,
    sample_inputs=_resize_samples,
    dynamic_samples=_resize_dynamic,
    error_inputs=_resize_errors,
    module=_resize_module,
    backward_args=lambda sample, grad: (grad, list(sample.args[0].shape[-2:]), sample.kwargs["coordinate_mode"]),
    tolerances=dict(_RESIZE_TOLERANCES),
    autocast_samples=_low_precision_first_input(_resize_samples),
    keeps_memory_format=True,
)


# --- trilinear_interpolation --------------------------------------------------------


def _trilinear_ref(feats, points):
    """The NeRF formula, written out corner by corner."""
    u, v, w = ((points + 1) / 2).unbind(-1)
    u, v, w = u[:, None], v[:, None], w[:, None]
    a, b, c, d = (1 - v) * (1 - w), (1 - v) * w, v * (1 - w), v * w
    f = feats.unbind(1)
    return (1 - u) * (a * f[0] + b * f[1] + c * f[2] + d * f[3]) + u * (a * f[4] + b * f[5] + c * f[6] + d * f[7])


def _trilinear_samples(device, dtype, requires_grad):
    def t(shape, low=-2, high=2, **kw):
        return make_tensor(shape, device=device, dtype=dtype, low=low, high=high, requires_grad=requires_grad, **kw)

    def pts(n, low=-1, high=1):
        return t((n, 3), low=low, high=high)

    yield SampleInput((t((5, 8, 7)), pts(5)), name="odd_F")
    yield SampleInput((t((0, 8, 4)), pts(0)), name="empty")
    yield SampleInput((t((3, 8, 1)), pts(3)), name="F1")
    yield SampleInput((t((4, 8, 0)), pts(4)), name="F0")
    yield SampleInput((t((4, 8, 256)), pts(4)), name="F256")
    yield SampleInput((t((2, 8, 300)), pts(2)), name="large_odd_F")
    yield SampleInput((t((37, 8, 32)), pts(37)), name="many_points")
    yield SampleInput((t((6, 8, 8)), pts(6, -3, 3)), name="outside_unit_cube")
    yield SampleInput((t((5, 8, 6), noncontiguous=True), t((3, 5), low=-1, high=1).t()), name="noncontiguous")
    corners = torch.tensor([[-1.0, -1, -1], [1, 1, 1], [1, -1, 1], [0, 0, 0]], dtype=dtype, device=device)
    yield SampleInput((t((4, 8, 3)), corners.requires_grad_(requires_grad)), name="corners_and_centre")
    yield from _trilinear_mixed_samples(device, dtype, requires_grad)


def _trilinear_mixed_samples(device, dtype, requires_grad):
    """feats of `dtype` with points of a more precise dtype: the output and
    feats' gradient have `dtype`, the points' gradient the points' dtype (the
    points are read at their own precision). None for float64 feats, whose
    samples test_gradcheck runs with float64 points only."""
    wider = {torch.float16: (torch.float32, torch.float64), torch.bfloat16: (torch.float32, torch.float64),
             torch.float32: (torch.float64,)}

    def t(shape, pdt=dtype, low=-2, high=2, **kw):
        return make_tensor(shape, device=device, dtype=pdt, low=low, high=high, requires_grad=requires_grad, **kw)

    for pdt in wider.get(dtype, ()):
        name = str(pdt).removeprefix("torch.")
        yield SampleInput((t((9, 8, 16)), t((9, 3), pdt, -1, 1)), name=f"points_{name}")
        yield SampleInput((t((6, 8, 5)), t((6, 3), pdt, -3, 3)), name=f"points_{name}_outside_unit_cube")
        yield SampleInput((t((5, 8, 6), noncontiguous=True), t((3, 5), pdt, -1, 1).t()),
                          name=f"points_{name}_noncontiguous")
        yield SampleInput((t((0, 8, 4)), t((0, 3), pdt, -1, 1)), name=f"points_{name}_empty")


def _trilinear_autocast_samples(device, low, requires_grad):
    """As under AMP: feats in the autocast dtype (from a Linear), float32 points."""

    def t(shape, dtype, low_=-2, high=2):
        return make_tensor(shape, device=device, dtype=dtype, low=low_, high=high, requires_grad=requires_grad)

    for n, f, name in ((9, 16, "F16"), (5, 7, "odd_F"), (0, 4, "empty")):
        yield SampleInput((t((n, 8, f), low), t((n, 3), torch.float32, -1, 1)), name=f"{name}_{low}_float32_points")


def _trilinear_dynamic(device, dtype):
    # No size shared with another dimension (8 corners, 3 coordinates): equal
    # sizes would be one symbol in the first graph and force a recompile.
    for n, f in ((5, 4), (17, 6), (40, 7)):
        yield SampleInput((make_tensor((n, 8, f), device=device, dtype=dtype, low=-2, high=2),
                           make_tensor((n, 3), device=device, dtype=dtype, low=-1, high=1)), name=f"n{n}_f{f}")


def _trilinear_errors(device):
    f = torch.randn(4, 8, 5, device=device)
    p = torch.rand(4, 3, device=device)
    yield ErrorInput(SampleInput((f[:, 0], p)), r"expected feats of shape \(N, 8, F\), got \[4, 5\]")
    yield ErrorInput(SampleInput((f[:, :7], p)), r"expected feats of shape \(N, 8, F\), got \[4, 7, 5\]")
    yield ErrorInput(SampleInput((f, p[:, :2])), r"expected points of shape \(N, 3\), got \[4, 2\]")
    yield ErrorInput(SampleInput((f, p[:3])), r"expected feats and points to have the same N, got 4 and 3")
    yield ErrorInput(SampleInput((f.long(), p)), r"expected feats to be a floating-point tensor")
    yield ErrorInput(SampleInput((f, p.int())), r"expected points to be a floating-point tensor")
    g = torch.randn(4, 5, device=device)
    yield ErrorInput(SampleInput((g[:, :4], f, p, [True, True])), r"expected grad_out of shape \(N, F\)",
                     backward=True)
    yield ErrorInput(SampleInput((g.double(), f, p, [True, True])), r"expected grad_out to have the dtype of feats",
                     backward=True)
    # grad_out follows feats, not points.
    yield ErrorInput(SampleInput((g.double(), f, p.double(), [True, True])),
                     r"expected grad_out to have the dtype of feats \(Float\), got Double", backward=True)
    other = _other_device(device)
    if other is not None:
        yield ErrorInput(SampleInput((f, p.to(other))), r"expected points and feats on the same device")
        yield ErrorInput(SampleInput((g.to(other), f, p, [True, True])), r"expected grad_out and feats on the same",
                         backward=True)


TRILINEAR_INTERPOLATION = OpInfo(
    name="trilinear_interpolation",
    op=customops.trilinear_interpolation,
    ref=_trilinear_ref,
    sample_inputs=_trilinear_samples,
    dynamic_samples=_trilinear_dynamic,
    error_inputs=_trilinear_errors,
    module=lambda sample: (customops.TrilinearInterpolation(), sample.args),
    backward_args=lambda sample, grad: (grad, *sample.args, [True, True]),
    autocast_samples=_trilinear_autocast_samples,
)

OP_DB: list[OpInfo] = [QUICK_GELU, IM2COL, COL2IM, CONV2D, DEPTHWISE_CONV2D, UPSAMPLE_BILINEAR2D,
                       TRILINEAR_INTERPOLATION]
