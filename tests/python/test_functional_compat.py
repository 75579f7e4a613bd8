"""customops' functions take every argument form of the PyTorch functions they
stand in for, with the same results: each sample that PyTorch's own OpInfos
(torch.testing._internal.common_methods_invocations.op_db) test those functions
with is run through ours and compared.

- F.conv2d: customops.conv2d, and customops.depthwise_conv2d where groups == C
  with one input channel per group;
- F.unfold: customops.im2col;
- F.fold: customops.col2im (PyTorch has no OpInfo for it: the adjoints of the
  unfold samples, with their argument forms, and nn.Fold's module tests);
- F.interpolate(mode="bilinear") and F.upsample_bilinear: customops.upsample_bilinear2d.

PyTorch's samples of dtypes customops does not compute are not run; the
dtypes each one skips are listed below with the reason and must raise.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

# torch.testing._internal imports expecttest, a test-only package (requirements.txt installs it; a bare torch
# install, like the GPU machine's, lacks it): skip this module there rather than fail the whole collection.
pytest.importorskip("expecttest", reason="PyTorch's OpInfo database needs the expecttest package")
from torch.testing._internal.common_methods_invocations import op_db as TORCH_OP_DB  # noqa: E402
from torch.testing._internal.common_nn import get_new_module_tests  # noqa: E402

# Importing torch.testing._internal's common_utils calls torch.backends.disable_global_flags(), which makes
# every later assignment to a torch.backends.cudnn flag raise, in this whole pytest process (the model
# benchmark's tests set them); undo that side effect of the import. (The flag lives in the globals of
# torch.backends' functions: an attribute set on the module object does not reach them.)
torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
assert not torch.backends.flags_frozen()

import customops
from op_db.conv import CONV2D
from op_db.fold import COL2IM, IM2COL
from op_db.upsample import UPSAMPLE_BILINEAR2D

pytestmark = pytest.mark.torch_dependent

DTYPES = (torch.float64, torch.float32, torch.bfloat16)

# PyTorch tests these dtypes too; customops' kernels take floating types only
# (float16, bfloat16, float32, float64) and raise for the others.
NOT_COMPUTED = {
    torch.complex64: "complex: no complex kernels",
    torch.complex128: "complex: no complex kernels",
    torch.int64: "integer convolution: no integer kernels",
    torch.uint8: "integer images: no integer kernels",
    torch.bool: "bool: no bool kernels",
}


def _torch_opinfo(name: str, variant: str = ""):
    return next(o for o in TORCH_OP_DB if o.name == name and o.variant_test_name == variant)


def _depthwise(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if groups != input.shape[-3] or weight.shape[1] != 1:
        return None  # not a depthwise convolution
    return customops.depthwise_conv2d(input, weight, bias, stride, padding, dilation)


def _upsample_bilinear(input, size=None, scale_factor=None):
    # F.upsample_bilinear is F.interpolate(mode="bilinear", align_corners=True).
    return customops.upsample_bilinear2d(input, size=size, scale_factor=scale_factor, align_corners=True)


# (PyTorch OpInfo name, variant, ours, customops' OpInfo for the tolerances)
CASES = [
    ("nn.functional.conv2d", "", customops.conv2d, CONV2D),
    ("nn.functional.conv2d", "", _depthwise, CONV2D),
    ("nn.functional.unfold", "", customops.im2col, IM2COL),
    ("nn.functional.interpolate", "bilinear", customops.upsample_bilinear2d, UPSAMPLE_BILINEAR2D),
    ("nn.functional.upsample_bilinear", "", _upsample_bilinear, UPSAMPLE_BILINEAR2D),
]


def _case_id(case) -> str:
    return f"{case[2].__name__}-{case[0]}{'-' + case[1] if case[1] else ''}"


def _to_double(a):
    return a.detach().double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a


def _compare(ours, theirs, sample_input, args, kwargs, dtype, tolerances, what: str) -> bool:
    """ours(...) against theirs(...) on float64 copies of the inputs (the values
    ours sees), gradients too in float64. False where ours declines the sample."""
    grad = dtype == torch.float64
    inp = sample_input.detach().clone().requires_grad_(grad)
    out = ours(inp, *args, **kwargs)
    if out is None:
        return False
    ref_inp = _to_double(sample_input).requires_grad_(grad)
    expected = theirs(ref_inp, *[_to_double(a) for a in args], **{k: _to_double(v) for k, v in kwargs.items()})
    rtol, atol = tolerances[dtype]
    assert out.dtype == dtype, what
    torch.testing.assert_close(out.double(), expected, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")
    if grad and out.numel():
        g = torch.randn_like(out)
        torch.testing.assert_close(torch.autograd.grad(out, inp, g)[0], torch.autograd.grad(expected, ref_inp, g)[0],
                                   rtol=rtol, atol=atol, msg=lambda m: f"{what} (gradient): {m}")
    return True


def _describe(sample) -> str:
    shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in sample.args]
    return f"input {tuple(sample.input.shape)}, args {shapes}, kwargs {sample.kwargs}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_pytorch_samples(case, dtype):
    name, variant, ours, info = case
    opinfo = _torch_opinfo(name, variant)
    ran = 0
    for sample in opinfo.sample_inputs("cpu", dtype, requires_grad=False):
        ran += _compare(ours, opinfo.op, sample.input, sample.args, sample.kwargs, dtype, info.tolerances,
                        f"{name} {_describe(sample)}")
    assert ran, f"{name}: no sample ran"


@pytest.mark.parametrize("case", CASES[:1] + CASES[2:], ids=_case_id)
def test_dtypes_not_computed_are_listed_and_raise(case):
    """Every dtype PyTorch tests and customops does not run has a reason above,
    and its first sample raises rather than giving another result."""
    name, variant, ours, _ = case
    opinfo = _torch_opinfo(name, variant)
    for dtype in opinfo.supported_dtypes("cpu"):
        if dtype in DTYPES or dtype == torch.float16:  # computed; float16 is left to test_ops, for time
            continue
        assert dtype in NOT_COMPUTED, f"{name}: PyTorch tests {dtype}, which has no reason here"
        sample = next(iter(opinfo.sample_inputs("cpu", dtype, requires_grad=False)))
        with pytest.raises(RuntimeError, match="floating-point"):
            ours(sample.input, *sample.args, **sample.kwargs)


def _fold_samples(dtype):
    """F.fold's argument forms: the adjoint of each unfold sample (columns of
    the shape its unfold gives, folded back to its image size), and nn.Fold's
    module tests from torch.testing._internal.common_nn."""
    for sample in _torch_opinfo("nn.functional.unfold").sample_inputs("cpu", dtype, requires_grad=False):
        cols_shape = F.unfold(sample.input.double(), *sample.args, **sample.kwargs).shape
        cols = torch.randn(cols_shape, dtype=torch.float64).to(dtype)
        yield cols, (tuple(sample.input.shape[-2:]), *sample.args), sample.kwargs
    for test in get_new_module_tests():
        if str(test.get("fullname", "")).startswith("Fold"):
            m = test["constructor"]()
            cols = torch.randn(test["input_size"], dtype=torch.float64).to(dtype)
            yield cols, (m.output_size, m.kernel_size, m.dilation, m.padding, m.stride), {}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fold_forms(dtype):
    ran = 0
    for cols, args, kwargs in _fold_samples(dtype):
        ran += _compare(customops.col2im, F.fold, cols, args, kwargs, dtype, COL2IM.tolerances,
                        f"fold input {tuple(cols.shape)}, args {args}")
    assert ran > 100


def test_unfold_module_tests():
    for test in get_new_module_tests():
        if str(test.get("fullname", "")).startswith("Unfold"):
            m = test["constructor"]()
            x = torch.randn(test["input_size"], dtype=torch.float64)
            args = (m.kernel_size, m.dilation, m.padding, m.stride)
            assert _compare(customops.im2col, F.unfold, x, args, {}, torch.float64, IM2COL.tolerances, str(args))


# --- arguments PyTorch's samples do not reach -------------------------------------


@pytest.mark.parametrize("kernel,dilation", [((2, 3), 1), ((4, 4), (1, 3)), ((3, 2), 2), ((1, 1), 1)])
@pytest.mark.parametrize("unbatched", [False, True])
def test_same_padding(kernel, dilation, unbatched):
    """'same' with even kernels (padding one more at the bottom/right), odd
    ones and dilations, batched and unbatched, in conv2d and depthwise_conv2d."""
    x = torch.randn(2, 4, 7, 6, dtype=torch.float64)
    x = x[0] if unbatched else x
    w = torch.randn(6, 2, *kernel, dtype=torch.float64)
    b = torch.randn(6, dtype=torch.float64)
    _compare(customops.conv2d, F.conv2d, x, (w, b), {"padding": "same", "dilation": dilation, "groups": 2},
             torch.float64, CONV2D.tolerances, "conv2d same")
    dw = torch.randn(8, 1, *kernel, dtype=torch.float64)
    torch.testing.assert_close(customops.depthwise_conv2d(x, dw, None, 1, "same", dilation),
                               F.conv2d(x, dw, None, 1, "same", dilation, groups=4))


def test_padding_errors_match_f_conv2d():
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    for kwargs, match in (({"padding": "same", "stride": 2}, "padding='same' is not supported for strided"),
                          ({"padding": "same", "stride": (1, 2)}, "padding='same' is not supported for strided"),
                          ({"padding": "full"}, "Invalid padding string: 'full'")):
        with pytest.raises(RuntimeError, match=match):
            F.conv2d(x, w, **kwargs)
        with pytest.raises(RuntimeError, match=match):
            customops.conv2d(x, w, **kwargs)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):  # as nn.Conv2d
        customops.Conv2d(2, 3, 3, stride=2, padding="same")


@pytest.mark.parametrize("in_size", [(4, 4), (5, 7), (9, 3)])
@pytest.mark.parametrize("scale", [1.7, 0.6, 2.0, (1.5, 0.75), 1 / 3])
@pytest.mark.parametrize("recompute", [None, False, True])
@pytest.mark.parametrize("align_corners", [None, False, True])
def test_interpolate_scale_factor_semantics(in_size, scale, recompute, align_corners):
    """scale_factor as F.interpolate reads it: unless recompute_scale_factor,
    half-pixel coordinates use 1/scale_factor, which differs from in/out when
    in * scale_factor is not whole; align_corners ignores the scale."""
    x = torch.randn(2, 3, *in_size, dtype=torch.float64)
    kwargs = {"scale_factor": scale, "align_corners": align_corners, "recompute_scale_factor": recompute}
    torch.testing.assert_close(customops.upsample_bilinear2d(x, **kwargs),
                               F.interpolate(x, mode="bilinear", **kwargs))


def test_interpolate_argument_errors():
    x = torch.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match="antialias=True is not supported"):
        customops.upsample_bilinear2d(x, size=8, antialias=True)
    with pytest.raises(ValueError, match="mode must be 'bilinear', got 'nearest'"):
        customops.upsample_bilinear2d(x, size=8, mode="nearest")
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful with an explicit size"):
        customops.upsample_bilinear2d(x, size=8, recompute_scale_factor=True)
    with pytest.raises(ValueError, match="contradicts align_corners=True"):
        customops.upsample_bilinear2d(x, size=8, coordinate_mode="half_pixel", align_corners=True)
    with pytest.raises(ValueError, match="recompute_scale_factor=False asks for 1/scale_factor"):
        customops.upsample_bilinear2d(x, scale_factor=1.7, coordinate_mode="asymmetric", recompute_scale_factor=False)


def test_scripted_module_takes_the_new_forms():
    """The string paddings and F.interpolate's keywords inside TorchScript."""

    class Model(torch.nn.Module):
        def forward(self, x, w):
            y = customops.conv2d(x, w, None, 1, "same") + customops.conv2d(x, w, padding=(1, 1))[..., :7, :6]
            y = y + customops.depthwise_conv2d(x, w[:4, :1], None, 1, "valid").sum()
            return customops.upsample_bilinear2d(y, scale_factor=1.7) .sum() + \
                customops.upsample_bilinear2d(y, size=5, align_corners=True).sum()

    x, w = torch.randn(1, 4, 7, 6), torch.randn(4, 4, 3, 3)
    torch.testing.assert_close(torch.jit.script(Model())(x, w), Model()(x, w))
