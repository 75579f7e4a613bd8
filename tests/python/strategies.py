"""Hypothesis strategies for the property tests (test_properties.py): what
the random calls of every customops operator are made of (each op's own
strategy, with the arguments its plain-PyTorch reference takes, is its
OpInfo's ``cases`` in op_db), the cases of each CUDA kernel, and the settings
profiles they run under.

A drawn case holds tensor *recipes* (TensorSpec), not tensors: the same recipe
builds the op's inputs in the case's dtype on the device under test and the
reference's inputs in float64 on the CPU from the same rounded values, in the
same layout (contiguous, channels_last, a strided slice, an offset slice, a
transpose, a stride-0 expansion). Values come from a seeded generator rather
than from drawn lists, which keeps examples cheap; hypothesis shrinks the
seed like any other integer.

Profiles, chosen by CUSTOMOPS_HYPOTHESIS_PROFILE:
- "ci" (default): a fixed sequence of examples (derandomize), no deadline;
  CI_EXAMPLES examples a test (cheap ops twice as many): the CPU tests take
  about 50 s on an idle 2-core machine, 2.5 min on one running other jobs
  (load 4), within the 4 minutes CI allows together with test_fuzz.py;
- "long": ten times the examples, a fresh random sequence each run, failures
  kept in hypothesis' example database (for the GPU machine and nightly runs);
- "smoke": a handful of examples, for checking the harness itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FLOATING = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
HALF = (torch.float16, torch.bfloat16)

CI_EXAMPLES = 400
_COMMON = dict(
    deadline=None,
    print_blob=True,
    # The generic autouse fixtures (conftest's seed) are function-scoped; the
    # tests rebuild every tensor from the example, so nothing leaks between examples.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
)
settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, database=None, **_COMMON)
settings.register_profile("long", max_examples=10 * CI_EXAMPLES, **_COMMON)
settings.register_profile("smoke", max_examples=3, derandomize=True, database=None, **_COMMON)
PROFILE = os.environ.get("CUSTOMOPS_HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


def examples(factor: float = 1.0) -> settings:
    """The loaded profile's example count times `factor` (for tests whose
    examples cost more or less than the typical one)."""
    return settings(max_examples=max(2, int(settings.default.max_examples * factor)))


# --- tensors ---------------------------------------------------------------------------------------------------

LAYOUTS = ("contiguous", "channels_last", "noncontiguous", "offset", "transposed", "expanded", "permuted")


@dataclass(frozen=True)
class TensorSpec:
    """How to build one argument: its shape, values (a seed and a range) and
    layout. `dim` is the dimension the layout acts on where it needs one
    (the expanded one); `dtype`, when set, overrides the case's."""

    shape: tuple
    seed: int
    low: float = -1.0
    high: float = 1.0
    layout: str = "contiguous"
    dim: int = 0
    dtype: Optional[torch.dtype] = None

    def _storage_shape(self) -> tuple:
        s = list(self.shape)
        if self.layout == "noncontiguous":
            s[-1] *= 2
        elif self.layout == "offset":
            s[0] += 1
        elif self.layout == "transposed":
            s[-1], s[-2] = s[-2], s[-1]
        elif self.layout == "expanded":
            s[self.dim] = 1
        elif self.layout == "permuted":
            s = [s[0], s[2], s[3], s[1]]
        return tuple(s)

    def _view(self, t: torch.Tensor) -> torch.Tensor:
        if self.layout == "noncontiguous":
            return t[..., ::2]
        if self.layout == "offset":
            return t[1:]
        if self.layout == "transposed":
            return t.transpose(-1, -2)
        if self.layout == "expanded":
            return t.expand(self.shape)
        if self.layout == "permuted":
            return t.permute(0, 3, 1, 2)
        return t

    def leaf(self, dtype: torch.dtype, device) -> torch.Tensor:
        """The dense tensor the argument is a view of (gradients are taken
        with respect to it): values from the seed, rounded to dtype."""
        g = torch.Generator().manual_seed(self.seed)
        values = torch.rand(self._storage_shape(), generator=g, dtype=torch.float64)
        values = values * (self.high - self.low) + self.low
        t = values.to(self.dtype or dtype)
        if self.layout == "channels_last":
            t = t.contiguous(memory_format=torch.channels_last)
        return t.to(device)

    def view(self, leaf: torch.Tensor) -> torch.Tensor:
        return self._view(leaf)

    def __repr__(self) -> str:  # what a falsifying example prints
        extra = "" if self.dtype is None else f", dtype={self.dtype}"
        dim = f", dim={self.dim}" if self.layout == "expanded" else ""
        return f"TensorSpec({self.shape}, seed={self.seed}, layout={self.layout!r}{dim}{extra})"


def layouts_for(shape, allow=LAYOUTS):
    """The layouts that apply to a tensor of this shape."""
    n = len(shape)
    ok = ["contiguous"]
    if n == 4:
        ok += ["channels_last", "permuted"]
    if n >= 1:
        ok += ["noncontiguous", "offset"]
    if n >= 2:
        ok.append("transposed")
    if any(s > 1 for s in shape):
        ok.append("expanded")
    return [layout for layout in ok if layout in allow]


@st.composite
def tensor_spec(draw, shape, low=-1.0, high=1.0, allow=LAYOUTS, dtype=None) -> TensorSpec:
    shape = tuple(int(s) for s in shape)
    layout = draw(st.sampled_from(layouts_for(shape, allow)))
    dim = 0
    if layout == "expanded":
        dim = draw(st.sampled_from([i for i, s in enumerate(shape) if s > 1]))
    if layout == "offset" and shape[0] == 0:
        layout = "contiguous"
    return TensorSpec(shape, draw(st.integers(0, 2**31 - 1)), low, high, layout, dim, dtype)


# --- cases ---------------------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One call: `op` (an op_db name), its positional arguments (TensorSpecs,
    None or plain values) and keyword arguments, the dtype of its tensors,
    and what a test needs to know besides: the backward op's output_mask,
    whether TF32 is allowed, environment variables (which CUDA algorithm)."""

    op: str
    args: tuple
    kwargs: dict
    dtype: torch.dtype
    mask: Optional[list] = None
    tf32: bool = False
    env: dict = field(default_factory=dict)
    grad_seed: int = 0

    def specs(self) -> list:
        return [a for a in self.args if isinstance(a, TensorSpec)]

    def __repr__(self) -> str:
        env = f", env={self.env}" if self.env else ""
        return (f"Case({self.op}, args={self.args}, kwargs={self.kwargs}, dtype={self.dtype}, mask={self.mask}, "
                f"tf32={self.tf32}{env})")


def _dtype(device, allowed=FLOATING):
    return st.sampled_from(allowed)


@st.composite
def _spatial(draw, k, d, pad_total, extra=6, least=1):
    """An axis size the window fits (padded by pad_total in all): from the smallest up to `extra` more."""
    lo = max(least, d * (k - 1) + 1 - pad_total)
    return draw(st.integers(lo, lo + extra))


def _pair_arg(draw, v):
    """A (h, w) argument as a pair, or as one int where both are equal (the wrappers broadcast it)."""
    return v[0] if v[0] == v[1] and draw(st.booleans()) else v


def _mask(draw, n, last=True):
    """An output_mask of the backward op: any subset (a gradient of an absent bias is not asked for)."""
    mask = [draw(st.booleans()) for _ in range(n)]
    if not last:
        mask[-1] = False
    return mask


MODES = ("half_pixel", "align_corners", "asymmetric")


# --- the CUDA kernels: one family of cases per kernel --------------------------------------------------------------
#
# Several kernels serve conv2d, depthwise_conv2d and upsample_bilinear2d on CUDA, each picked by rules on dtype,
# layout, channels and window (kernels/cuda/*/: conv2d.cu fast_path and the supports/takes functions, the
# depthwise launchers, upsample's forward/backward). A family draws cases inside one kernel's rules, so that its
# test reaches that kernel with random shapes; `kernels` lists the kernel-name patterns (cuda_kernel_names) its
# examples must reach between them: "a&b" needs both substrings, "!x" excludes one.


@dataclass
class Family:
    op: str
    cases: Callable[[], st.SearchStrategy]
    kernels: tuple
    needs: str = ""  # "sm80", "sm90_conv": what the device or build must have


def _cuda_conv_case(draw, *, dtype, c, o, groups, k, s, d, padding, layout, batches=(1, 2), extra=6, tf32=False,
                    env=None, bias=True):
    h = draw(_spatial(k[0], d[0], 2 * padding[0], extra))
    w = draw(_spatial(k[1], d[1], 2 * padding[1], extra))
    shape = (draw(st.sampled_from(batches)), c, h, w)
    x = draw(tensor_spec(shape, allow=(layout,)))
    wt = draw(tensor_spec((o, c // groups) + tuple(k), allow=("contiguous", "channels_last")))
    b = draw(tensor_spec((o,), allow=("contiguous",))) if bias else None
    kw = {"stride": tuple(s), "padding": tuple(padding), "dilation": tuple(d), "groups": groups}
    return Case("conv2d", (x, wt, b), kw, dtype, mask=[True, True, b is not None], tf32=tf32, env=env or {},
                grad_seed=draw(st.integers(0, 2**31 - 1)))


def _ints(draw, lo, hi):
    return (draw(st.integers(lo, hi)), draw(st.integers(lo, hi)))


@st.composite
def conv_explicit(draw):
    """im2col + GEMM: float64 takes no other path; a window larger than 1x1 needs the columns."""
    groups = draw(st.integers(1, 2))
    k = (draw(st.integers(2, 4)), draw(st.integers(1, 4)))
    return _cuda_conv_case(draw, dtype=torch.float64, c=groups * draw(st.integers(1, 4)),
                           o=groups * draw(st.integers(1, 4)), groups=groups, k=k, s=_ints(draw, 1, 2),
                           d=_ints(draw, 1, 2), padding=_ints(draw, 0, 2),
                           layout=draw(st.sampled_from(["contiguous", "channels_last", "noncontiguous"])))


@st.composite
def conv_grouped_cuda_cores(draw):
    """grouped.cu's CUDA-core kernels: groups > 1 of 4-32 channels (multiples of 4), float32 without TF32 or
    half types with groups the tensor cores do not take (not multiples of 8)."""
    dtype = draw(st.sampled_from([torch.float32, torch.float16, torch.bfloat16]))
    cg = draw(st.sampled_from([4, 12]) if dtype != torch.float32 else st.sampled_from([4, 8, 12, 16]))
    kg = draw(st.sampled_from([4, 8, 12, 16]))
    groups = draw(st.integers(2, 4))
    return _cuda_conv_case(draw, dtype=dtype, c=groups * cg, o=groups * kg, groups=groups,
                           k=_ints(draw, 1, 3), s=_ints(draw, 1, 2), d=_ints(draw, 1, 2), padding=_ints(draw, 0, 2),
                           layout=draw(st.sampled_from(["channels_last", "contiguous"])))


@st.composite
def conv_grouped_tensor_cores(draw):
    """grouped_mma.cu: half types, groups of 8 or 16 input channels (a power of two of 16-byte chunks) and 8 or
    16 output channels (the weight gradient's kernel takes 8)."""
    groups = draw(st.integers(2, 4))
    return _cuda_conv_case(draw, dtype=draw(st.sampled_from(HALF)), c=groups * draw(st.sampled_from([8, 16])),
                           o=groups * draw(st.sampled_from([8, 8, 16])), groups=groups, k=_ints(draw, 1, 3),
                           s=_ints(draw, 1, 2), d=_ints(draw, 1, 2), padding=_ints(draw, 0, 2),
                           layout=draw(st.sampled_from(["channels_last", "contiguous"])))


@st.composite
def conv_stem(draw):
    """stem*.cu: channels_last images of 2-7 channels, one group, an even number of output channels (multiples
    of 8 for the gradients, at most 64 for the input gradient's), no column dilation, filter rows of at most 8
    taps; half types, or float32 as TF32. 7x7 only for up to 4 channels at column stride 2 (the weight gradient's
    run of 4 padded channels)."""
    dtype = draw(st.sampled_from([torch.float16, torch.bfloat16, torch.float32]))
    c = draw(st.integers(2, 7))
    k = draw(st.sampled_from([(3, 3), (3, 3), (2, 2), (5, 5), (3, 2), (4, 4)] + ([(7, 7)] if c <= 4 else [])))
    s = (draw(st.integers(1, 2)), 2 if k == (7, 7) else draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, k[0] // 2)), draw(st.integers(0, k[1] // 2)))
    return _cuda_conv_case(draw, dtype=dtype, c=c, o=draw(st.sampled_from([8, 16, 32, 64])), groups=1, k=k, s=s,
                           d=(draw(st.integers(1, 2)), 1), padding=padding, layout="channels_last", extra=12,
                           tf32=dtype == torch.float32)


@st.composite
def conv_tf32_weight_grad(draw):
    """tf32_wgrad.cu: float32 with TF32 allowed, one group, channels multiples of 4 (from 8: fewer are the
    stem's on channels_last), not a 1x1 unit-stride unpadded filter (cuBLAS's GEMM)."""
    k = draw(st.sampled_from([(3, 3), (2, 2), (3, 1), (5, 5)]))
    return _cuda_conv_case(draw, dtype=torch.float32, c=draw(st.sampled_from([8, 12, 16, 32])),
                           o=draw(st.sampled_from([4, 8, 16, 24])), groups=1, k=k, s=_ints(draw, 1, 2),
                           d=_ints(draw, 1, 2), padding=_ints(draw, 0, 1),
                           layout=draw(st.sampled_from(["channels_last", "contiguous"])), tf32=True)


@st.composite
def conv_half_weight_grad(draw):
    """half_wgrad.cu: half types, one group, channels multiples of 8 up to 64 (from 8: fewer are the stem's),
    filters of at most 9 taps, not 1x1 unit-stride unpadded."""
    k = draw(st.sampled_from([(3, 3), (2, 2), (3, 1), (1, 3), (2, 3)]))
    return _cuda_conv_case(draw, dtype=draw(st.sampled_from(HALF)), c=draw(st.sampled_from([8, 16, 32, 64])),
                           o=draw(st.sampled_from([8, 16, 24, 64])), groups=1, k=k, s=_ints(draw, 1, 2),
                           d=_ints(draw, 1, 2), padding=_ints(draw, 0, 1),
                           layout=draw(st.sampled_from(["channels_last", "contiguous"])))


@st.composite
def conv_implicit(draw):
    """conv2d's implicit GEMM (CUTLASS, sm_90): half types, one group, channels multiples of 8 (from 8); all three
    passes under CUSTOMOPS_CONV2D_ALGO=implicit (the input gradient at unit stride)."""
    return _cuda_conv_case(draw, dtype=draw(st.sampled_from(HALF)), c=draw(st.sampled_from([8, 16, 24, 72])),
                           o=draw(st.sampled_from([8, 16, 40])), groups=1, k=_ints(draw, 1, 3), s=(1, 1),
                           d=_ints(draw, 1, 2), padding=_ints(draw, 0, 1),
                           layout=draw(st.sampled_from(["channels_last", "contiguous"])),
                           env={"CUSTOMOPS_CONV2D_ALGO": "implicit"})


def _cuda_depthwise_case(draw, *, dtype, c, m, k, s, d, padding, layout, hw=(1, 12), batches=(1, 2), env=None):
    h = draw(_spatial(k[0], d[0], 2 * padding[0], hw[1], least=hw[0]))
    w = draw(_spatial(k[1], d[1], 2 * padding[1], hw[1], least=hw[0]))
    x = draw(tensor_spec((draw(st.sampled_from(batches)), c, h, w), allow=(layout,)))
    wt = draw(tensor_spec((c * m, 1) + tuple(k), allow=("contiguous",)))
    b = draw(st.none() | tensor_spec((c * m,), allow=("contiguous",)))
    kw = {"stride": tuple(s), "padding": tuple(padding), "dilation": tuple(d)}
    return Case("depthwise_conv2d", (x, wt, b), kw, dtype, mask=[True, True, b is not None], env=env or {},
                grad_seed=draw(st.integers(0, 2**31 - 1)))


@st.composite
def depthwise_nchw_small(draw):
    """depthwise_conv2d.cu's register kernels: NCHW 3x3 and 5x5 at unit stride and dilation (the input gradient
    too with one filter a channel); the weight gradient's on planes at most 32 wide."""
    k = draw(st.sampled_from([(3, 3), (5, 5)]))
    return _cuda_depthwise_case(draw, dtype=draw(st.sampled_from(FLOATING)), c=draw(st.integers(1, 6)),
                                m=draw(st.sampled_from([1, 1, 2])), k=k, s=(1, 1), d=(1, 1),
                                padding=_ints(draw, 0, 2), layout="contiguous", hw=(1, 20))


@st.composite
def depthwise_nchw_tiled(draw):
    """depthwise_conv2d.cu's tiled kernels: NCHW, unit stride and dilation along rows, any other filter."""
    k = draw(st.sampled_from([(2, 2), (3, 5), (7, 7), (4, 3), (1, 3), (6, 1), (9, 9)]))
    return _cuda_depthwise_case(draw, dtype=draw(st.sampled_from(FLOATING)), c=draw(st.integers(1, 6)),
                                m=draw(st.sampled_from([1, 2])), k=k, s=(draw(st.integers(1, 2)), 1),
                                d=(draw(st.integers(1, 2)), 1), padding=_ints(draw, 0, 3), layout="contiguous")


@st.composite
def depthwise_nchw_direct(draw):
    """depthwise_conv2d.cu's one-thread-per-output kernels: NCHW with a row stride or dilation, filters other
    than 3x3 and 5x5 (their weight gradient keeps the register kernel)."""
    s, d = (draw(st.integers(1, 2)), draw(st.integers(2, 3))), (draw(st.integers(1, 2)), 1)
    if draw(st.booleans()):
        s, d = (s[0], 1), (d[0], draw(st.integers(2, 3)))
    k = draw(st.sampled_from([(2, 3), (4, 4), (7, 7), (1, 2), (3, 4)]))
    return _cuda_depthwise_case(draw, dtype=draw(st.sampled_from(FLOATING)), c=draw(st.integers(1, 6)),
                                m=draw(st.sampled_from([1, 2])), k=k, s=s, d=d, padding=_ints(draw, 0, 3),
                                layout="contiguous")


def _lanes_channels(draw, dtype, least_half=8):
    """Channels the NHWC column and tensor-core kernels take: multiples of 8 (every dtype's 16-byte lanes)."""
    return 8 * draw(st.integers(max(1, least_half // 8) if dtype in HALF else 1, 8 if dtype in HALF else 4))


@st.composite
def depthwise_nhwc_columns(draw):
    """nhwc_columns.cu / nhwc_column_wgrad.cu: channels_last 3x3, one filter a channel, row stride 1 or 2, no
    dilation, channels a multiple of the lanes (half types: from 64, 128 bytes a pixel)."""
    dtype = draw(st.sampled_from(FLOATING))
    return _cuda_depthwise_case(draw, dtype=dtype, c=_lanes_channels(draw, dtype, 64), m=1, k=(3, 3),
                                s=(draw(st.integers(1, 2)), draw(st.integers(1, 2))), d=(1, 1),
                                padding=_ints(draw, 0, 2), layout="channels_last")


@st.composite
def depthwise_nhwc_mma(draw):
    """nhwc_mma.cu: half types on channels_last, filters of more than 9 taps up to 9x9, unit stride, no
    dilation, one filter a channel, channels multiples of 8."""
    k = draw(st.sampled_from([(5, 5), (7, 7), (3, 5), (9, 9), (4, 4), (2, 8)]))
    dtype = draw(st.sampled_from(HALF))
    return _cuda_depthwise_case(draw, dtype=dtype, c=_lanes_channels(draw, dtype), m=1, k=k, s=(1, 1), d=(1, 1),
                                padding=_ints(draw, 0, 4), layout="channels_last")


@st.composite
def depthwise_nhwc_rows(draw):
    """nhwc.cu's row-streaming and tiled weight-gradient kernels: channels_last filters the column and tensor-core
    kernels leave (float types' 5x5 and larger, dilation, odd channel counts) and everything under
    CUSTOMOPS_DEPTHWISE_ALGO=rows."""
    rows = draw(st.booleans())
    k = draw(st.sampled_from([(3, 3), (5, 5), (7, 7), (1, 1), (2, 4)]))
    dtype = draw(st.sampled_from(FLOATING)) if rows else draw(st.sampled_from([torch.float32, torch.float64]))
    return _cuda_depthwise_case(draw, dtype=dtype, c=draw(st.integers(2, 20)), m=1, k=k, s=(1, 1),
                                d=(draw(st.integers(1, 2)), draw(st.integers(1, 2))), padding=_ints(draw, 0, 3),
                                layout="channels_last", env={"CUSTOMOPS_DEPTHWISE_ALGO": "rows"} if rows else {})


@st.composite
def depthwise_nhwc_direct(draw):
    """nhwc.cu's direct input gradient: channels_last with a channel multiplier or a stride."""
    m, s = draw(st.sampled_from([(2, (1, 1)), (1, (2, 2)), (3, (2, 1)), (2, (1, 3))]))
    return _cuda_depthwise_case(draw, dtype=draw(st.sampled_from(FLOATING)), c=draw(st.integers(2, 12)), m=m,
                                k=_ints(draw, 1, 5), s=s, d=_ints(draw, 1, 2), padding=_ints(draw, 0, 2),
                                layout="channels_last")


@st.composite
def depthwise_periods(draw):
    """period_dgrad.cu's input gradient: square 3x3, 5x5 and 7x7 windows at stride 2, no dilation, one filter a
    channel, both layouts (channels_last: odd channel counts take one channel a word, even ones two)."""
    k = draw(st.sampled_from([3, 5, 7]))
    return _cuda_depthwise_case(draw, dtype=draw(st.sampled_from(FLOATING)), c=draw(st.integers(1, 12)), m=1,
                                k=(k, k), s=(2, 2), d=(1, 1), padding=_ints(draw, 0, k),
                                layout=draw(st.sampled_from(["contiguous", "channels_last"])))


@st.composite
def _cuda_upsample(draw, layout, size_h, size_w, in_h=(1, 12), in_w=(1, 12), channels=(1, 5)):
    shape = (draw(st.integers(1, 2)), draw(st.integers(*channels)), draw(st.integers(*in_h)),
             draw(st.integers(*in_w)))
    if layout == "channels_last" and shape[1] == 1:
        shape = (shape[0], 2, shape[2], shape[3])
    x = draw(tensor_spec(shape, -4, 4, allow=(layout,)))
    size = (draw(size_h(shape[2])), draw(size_w(shape[3])))
    kw = {"output_size": size, "coordinate_mode": draw(st.sampled_from(MODES))}
    return Case("upsample_bilinear2d", (x,), kw, draw(st.sampled_from(FLOATING)),
                grad_seed=draw(st.integers(0, 2**31 - 1)))


def _any_size(_):
    return st.integers(1, 24)


def upsample_nchw():
    """upsample.cu: NCHW forward, and the tiled backward (up to 8 readers an input column: an input index is read
    by the outputs whose first tap is it or the one before, twice the ratio, so at most about 3x wider)."""
    return _cuda_upsample("contiguous", _any_size, lambda w: st.integers(1, 2 * w + 1))


def upsample_channels_last():
    """upsample.cu's NHWC forward and its gather backward."""
    return _cuda_upsample("channels_last", _any_size, _any_size)


def upsample_wide_rows():
    """upsample.cu's row backward: NCHW rows too wide for 8 in a tile's shared memory (over 1024 output columns),
    upsampled at most 3x along them (more readers an input column take the gather kernel)."""
    return _cuda_upsample("contiguous", lambda h: st.integers(8, 12), lambda w: st.integers(1100, 1200),
                          in_h=(8, 10), in_w=(400, 500), channels=(1, 2))


CUDA_FAMILIES: dict[str, Family] = {
    "conv2d_explicit": Family("conv2d", conv_explicit, ("im2col_kernel", "col2im_kernel")),
    "conv2d_grouped_cuda_cores": Family("conv2d", conv_grouped_cuda_cores, ("direct_conv", "weight_grad_direct")),
    "conv2d_grouped_tensor_cores": Family("conv2d", conv_grouped_tensor_cores, ("mma_conv", "mma_weight_grad"),
                                          "sm80"),
    "conv2d_stem": Family("conv2d", conv_stem, ("stem_conv", "stem_input_grad", "stem_weight_grad"), "sm80"),
    "conv2d_tf32_weight_grad": Family("conv2d", conv_tf32_weight_grad, ("tf32_weight_grad",), "sm80"),
    "conv2d_half_weight_grad": Family("conv2d", conv_half_weight_grad, ("half_weight_grad",), "sm80"),
    "conv2d_implicit": Family("conv2d", conv_implicit, ("ConvUniversal",), "sm90_conv"),
    "depthwise_nchw_small": Family("depthwise_conv2d", depthwise_nchw_small,
                                   ("small_corr_kernel", "small_weight_grad_kernel")),
    "depthwise_nchw_tiled": Family("depthwise_conv2d", depthwise_nchw_tiled,
                                   ("tiled_corr_kernel", "tiled_weight_grad_kernel")),
    "depthwise_nchw_direct": Family("depthwise_conv2d", depthwise_nchw_direct,
                                    ("direct_forward_kernel&!depthwise_nhwc",
                                     "direct_input_grad_kernel&!depthwise_nhwc",
                                     "direct_weight_grad_kernel&!depthwise_nhwc")),
    "depthwise_nhwc_columns": Family("depthwise_conv2d", depthwise_nhwc_columns,
                                     ("column_corr_kernel", "column_weight_grad_kernel")),
    "depthwise_nhwc_mma": Family("depthwise_conv2d", depthwise_nhwc_mma, ("mma_corr_kernel",), "sm80"),
    "depthwise_nhwc_rows": Family("depthwise_conv2d", depthwise_nhwc_rows,
                                  ("row_corr_kernel", "weight_grad_tile_kernel")),
    "depthwise_nhwc_direct": Family("depthwise_conv2d", depthwise_nhwc_direct,
                                    ("direct_input_grad_kernel&depthwise_nhwc",)),
    "depthwise_periods": Family("depthwise_conv2d", depthwise_periods, ("period_input_grad_kernel",)),
    "upsample_nchw": Family("upsample_bilinear2d", upsample_nchw, ("forward_nchw_kernel", "backward_tile_kernel")),
    "upsample_channels_last": Family("upsample_bilinear2d", upsample_channels_last,
                                     ("forward_nhwc_kernel", "backward_any_kernel")),
    "upsample_wide_rows": Family("upsample_bilinear2d", upsample_wide_rows, ("backward_nchw_kernel",)),
}


def reached(pattern: str, names) -> bool:
    """Whether a kernel named by `pattern` ("a&b": both substrings, "!x": not x) is among `names`."""
    parts = pattern.split("&")
    return any(all((p[1:] not in n) if p.startswith("!") else (p in n) for p in parts) for n in names)


def with_dtype(case: Case, dtype: torch.dtype) -> Case:
    return replace(case, dtype=dtype)

