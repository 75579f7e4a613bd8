"""customops.convert on a model holding every convertible layer and layers it must
leave alone, nested in Sequential, ModuleList, ModuleDict and custom modules:
numerics (forward and gradients) against the unconverted model, the report,
copy and inplace semantics, what carries over to the new modules, and
TorchScript, torch.compile and torch.export of the result."""

from __future__ import annotations

import copy
import logging

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import customops
from conftest import requires_cuda

pytestmark = pytest.mark.torch_dependent


class ScaledConv(nn.Conv2d):
    """A subclass with its own forward: convert must not swap it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * self._conv_forward(x, self.weight, self.bias)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dw = nn.Conv2d(16, 16, 5, padding=2, groups=16)  # depthwise 5x5 with bias
        self.pw = nn.Conv2d(16, 16, 1)  # pointwise: converts only with conv2d=True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pw(torch.relu(self.dw(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())
        self.features = nn.ModuleList([
            nn.Conv2d(8, 16, 3, padding=1, groups=8, bias=False),  # multiplier 2, no bias
            nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16),  # stride 2
            nn.Conv2d(16, 16, 3, padding=(2, 1), dilation=(2, 1), groups=16),  # dilation
            nn.Conv2d(16, 16, (4, 3), padding="same", dilation=(1, 2), groups=16),  # 'same', even kernel
            nn.Conv2d(16, 16, 3, padding=1, groups=2),  # grouped, not depthwise
            nn.Conv2d(16, 16, 3, padding=1, groups=16, padding_mode="reflect"),
            ScaledConv(16, 16, 3, padding=1, groups=16),
        ])
        self.resize = nn.ModuleDict({
            "half_pixel": nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
            "corners": nn.Upsample(size=(13, 11), mode="bilinear", align_corners=True),
            "corners_frac": nn.UpsamplingBilinear2d(scale_factor=1.5),  # align_corners=True: any scale
            "recomputed": nn.Upsample(scale_factor=0.75, mode="bilinear", recompute_scale_factor=True),
            "fraction": nn.Upsample(scale_factor=1.5, mode="bilinear"),  # 1/1.5 mapping: left alone
            "nearest": nn.Upsample(scale_factor=2, mode="nearest"),
            "nearest2d": nn.UpsamplingNearest2d(size=(13, 11)),
        })
        self.block = Block()
        self.head = nn.Conv2d(16, 3, 1)

    def forward(self, x: torch.Tensor):
        x = self.stem(x)
        for layer in self.features:
            x = layer(x)
        a = self.resize["half_pixel"](x) + self.resize["nearest"](x)
        b = self.resize["corners"](x) * self.resize["nearest2d"](x)
        c = self.resize["corners_frac"](x) + self.resize["fraction"](x) + self.resize["recomputed"](a)
        return self.block(a), self.head(b), c


SWAPPED = {  # name -> (old class, new class) with conv2d=False
    "features.0": ("Conv2d", "DepthwiseConv2d"),
    "features.1": ("Conv2d", "DepthwiseConv2d"),
    "features.2": ("Conv2d", "DepthwiseConv2d"),
    "features.3": ("Conv2d", "DepthwiseConv2d"),
    "resize.half_pixel": ("Upsample", "UpsampleBilinear2d"),
    "resize.corners": ("Upsample", "UpsampleBilinear2d"),
    "resize.corners_frac": ("UpsamplingBilinear2d", "UpsampleBilinear2d"),
    "resize.recomputed": ("Upsample", "UpsampleBilinear2d"),
    "block.dw": ("Conv2d", "DepthwiseConv2d"),
}
PLAIN_CONVS = ("stem.0", "features.4", "block.pw", "head")  # swapped to Conv2d only with conv2d=True
SKIPPED_ALWAYS = {  # name -> a phrase its reason must contain
    "features.5": "padding_mode='reflect'",
    "features.6": "subclass",
    "resize.fraction": "recompute_scale_factor",
    "resize.nearest": "mode='nearest'",
    "resize.nearest2d": "mode='nearest'",
}
COORDINATE_MODES = {"resize.half_pixel": "half_pixel", "resize.corners": "align_corners",
                    "resize.corners_frac": "align_corners", "resize.recomputed": "half_pixel"}


def make_net(dtype=torch.float64, device="cpu") -> Net:
    return Net().to(device=device, dtype=dtype)


def make_input(dtype=torch.float64, device="cpu") -> torch.Tensor:
    return torch.randn(2, 4, 12, 10, dtype=dtype, device=device)


def modules_by_name(model: nn.Module) -> dict:
    return dict(model.named_modules())


def assert_outputs_close(got, want, **tol) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **tol)


def forward_and_grads(model: nn.Module, x: torch.Tensor, seed: int = 1):
    x = x.detach().clone().requires_grad_(True)
    model.zero_grad(set_to_none=True)
    outs = model(x)
    gen = torch.Generator(device=x.device).manual_seed(seed)
    loss = sum((o * torch.randn(o.shape, generator=gen, dtype=o.dtype, device=o.device)).sum() for o in outs)
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    return [o.detach() for o in outs], x.grad, grads


TOLERANCES = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=1e-5)}


# ---------------------------------------------------------------- what converts


@pytest.mark.parametrize("conv2d", [False, True])
def test_report_lists_every_swap_and_every_layer_left_alone(conv2d):
    original = make_net()
    model, report = customops.convert(original, conv2d=conv2d, return_report=True)
    want_swapped = dict(SWAPPED)
    if conv2d:
        want_swapped.update({name: ("Conv2d", "Conv2d") for name in PLAIN_CONVS})
    assert {s.name: (s.old, s.new) for s in report.swapped} == want_swapped
    assert len(report) == len(want_swapped)
    skipped = {s.name: s.reason for s in report.skipped}
    want_skipped = set(SKIPPED_ALWAYS) | (set() if conv2d else set(PLAIN_CONVS))
    assert set(skipped) == want_skipped
    for name, phrase in SKIPPED_ALWAYS.items():
        assert phrase in skipped[name], (name, skipped[name])
    if not conv2d:
        assert "groups=2 is not depthwise" in skipped["features.4"] and "conv2d=False" in skipped["features.4"]
    modules = modules_by_name(model)
    for name, (_, new) in want_swapped.items():
        assert type(modules[name]) is getattr(customops, new), name
    original_modules = modules_by_name(original)
    for name in want_skipped:
        assert type(modules[name]) is type(original_modules[name]), name
    for name, mode in COORDINATE_MODES.items():
        assert modules[name].coordinate_mode == mode
    assert modules["features.3"].padding == "same"
    assert modules["features.0"].bias is None and modules["features.0"].out_channels == 16


def test_report_reads_well():
    _, report = customops.convert(make_net(), return_report=True)
    text = str(report)
    assert text.splitlines()[0] == "customops.convert: swapped 9 module(s), left 9 alone"
    assert "  swapped features.1: Conv2d -> DepthwiseConv2d" in text.splitlines()
    assert any(line.startswith("  skipped resize.nearest (Upsample): mode='nearest'") for line in text.splitlines())


def test_returns_the_model_and_logs_the_report(caplog):
    # `model = customops.convert(model)` must leave a callable model, as the ecosystem's converters do.
    original = make_net()
    with caplog.at_level(logging.INFO, logger="customops.convert"):
        model = customops.convert(original)
    assert isinstance(model, nn.Module) and model is not original
    x = make_input()
    assert_outputs_close(model(x), original(x))
    assert "customops.convert: swapped 9 module(s), left 9 alone" in caplog.messages[0]
    assert "swapped features.1: Conv2d -> DepthwiseConv2d" in caplog.messages[0]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("conv2d", [False, True])
def test_forward_and_gradients_match_the_original(dtype, conv2d):
    original = make_net(dtype)
    converted, report = customops.convert(original, conv2d=conv2d, return_report=True)
    assert len(report) == len(SWAPPED) + (len(PLAIN_CONVS) if conv2d else 0)
    x = make_input(dtype)
    want = forward_and_grads(original, x)
    got = forward_and_grads(converted, x)
    tol = TOLERANCES[dtype]
    assert_outputs_close(got[0], want[0], **tol)
    torch.testing.assert_close(got[1], want[1], **tol)
    assert got[2].keys() == want[2].keys()
    for name in want[2]:
        torch.testing.assert_close(got[2][name], want[2][name], **tol, msg=lambda m: f"{name}: {m}")


def test_left_alone_layers_with_reasons():
    conv = lambda **kw: nn.Conv2d(4, 4, 3, groups=4, **kw)  # noqa: E731
    weight_normed = nn.utils.parametrizations.weight_norm(conv())
    lazy = nn.LazyConv2d(4, 3, groups=4)
    model = nn.Sequential(weight_normed, lazy, conv(dtype=torch.complex64), conv(padding_mode="circular"),
                          nn.Upsample(scale_factor=0.5, mode="bilinear"), nn.Upsample(scale_factor=2, mode="bicubic"),
                          nn.Upsample(scale_factor=(2, 2.5), mode="bilinear"), nn.ConvTranspose2d(4, 4, 3, groups=4))
    converted, report = customops.convert(model, return_report=True)
    assert len(report) == 0
    reasons = {s.name: s.reason for s in report.skipped}
    assert "parametrized" in reasons["0"]
    assert "lazy" in reasons["1"]
    assert "complex64" in reasons["2"]
    assert "padding_mode='circular'" in reasons["3"]
    assert "scale_factor=0.5 is not a whole number" in reasons["4"]
    assert "mode='bicubic'" in reasons["5"]
    assert "recompute_scale_factor" in reasons["6"]
    assert "7" not in reasons  # not a candidate kind
    assert [type(m) for m in converted] == [type(m) for m in model]


def test_skipped_fractional_scale_would_change_numerics():
    """Why resize.fraction is left alone: with scale_factor=1.5 and no recompute,
    PyTorch samples at (o + 0.5)/1.5 - 0.5, the customops kernel at
    (o + 0.5) * in/out - 0.5, and 5 rows -> 7 rows gives in/out = 5/7, not 1/1.5.
    UpsampleBilinear2d(scale_factor=1.5) matches PyTorch only by running
    PyTorch's kernel, so converting would gain nothing."""
    x = torch.randn(1, 2, 5, 6, dtype=torch.float64)
    theirs = nn.Upsample(scale_factor=1.5, mode="bilinear")(x)
    kernel = customops.upsample_bilinear2d(x, (7, 9))
    assert theirs.shape == kernel.shape == (1, 2, 7, 9)
    assert (theirs - kernel).abs().max() > 1e-3
    torch.testing.assert_close(customops.UpsampleBilinear2d(scale_factor=1.5)(x), theirs)
    recomputed = nn.Upsample(scale_factor=1.5, mode="bilinear", recompute_scale_factor=True)(x)
    torch.testing.assert_close(customops.UpsampleBilinear2d(scale_factor=1.5, recompute_scale_factor=True)(x),
                               recomputed)
    torch.testing.assert_close(kernel, recomputed)


def test_inputs_of_other_ranks_behave_as_before():
    """nn.Conv2d takes unbatched (C, H, W) input, and so does the converted layer;
    bilinear nn.Upsample refuses 3-D and 5-D input, and so does its replacement."""
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1, groups=3), nn.Upsample(scale_factor=2, mode="bilinear"))
    model = model.double()
    converted, report = customops.convert(model, return_report=True)
    assert len(report) == 2
    x = torch.randn(3, 5, 6, dtype=torch.float64)
    torch.testing.assert_close(converted[0](x), model[0](x))
    for shape in [(3, 5, 6), (1, 3, 2, 5, 6)]:
        for layer in (model[1], converted[1]):
            with pytest.raises((NotImplementedError, RuntimeError), match="4D input|4-D"):
                layer(torch.randn(shape))


def test_convertible_model_itself_is_replaced():
    dw = nn.Conv2d(3, 6, 3, groups=3)
    new, report = customops.convert(dw, inplace=True, return_report=True)
    assert type(new) is customops.DepthwiseConv2d and new.weight is dw.weight
    assert report.swapped == [("", "Conv2d", "DepthwiseConv2d")]
    assert "swapped (model): Conv2d -> DepthwiseConv2d" in str(report)


def test_a_module_shared_by_two_parents_gets_one_replacement():
    dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)
    model = nn.Sequential(nn.Sequential(dw), nn.ModuleList([dw]))
    converted, report = customops.convert(model, return_report=True)
    assert converted[0][0] is converted[1][0]
    assert type(converted[0][0]) is customops.DepthwiseConv2d
    assert [s.name for s in report.swapped] == ["0.0"]
    assert list(converted.state_dict()) == list(model.state_dict())


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="coordinate_mode"):
        customops.convert(make_net(), coordinate_mode="tf1")
    with pytest.raises(TypeError, match="ScriptModule"):
        customops.convert(torch.jit.script(nn.Sequential(nn.Conv2d(2, 2, 3, groups=2))))
    with pytest.raises(TypeError, match="nn.Module"):
        customops.convert(torch.randn(2))


# ---------------------------------------------------------------- copy and inplace


def test_copy_leaves_the_original_untouched():
    original = make_net()
    before = copy.deepcopy(original.state_dict())
    types = {name: type(m) for name, m in original.named_modules()}
    converted = customops.convert(original)
    assert converted is not original
    assert {name: type(m) for name, m in original.named_modules()} == types
    params, new_params = dict(original.named_parameters()), dict(converted.named_parameters())
    assert params.keys() == new_params.keys()
    for name, p in params.items():
        assert new_params[name] is not p and new_params[name].data_ptr() != p.data_ptr()
        torch.testing.assert_close(new_params[name], p, rtol=0, atol=0)
    with torch.no_grad():
        for p in converted.parameters():
            p.add_(1)
    for name, value in original.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_inplace_keeps_the_parameter_objects_and_the_optimizer():
    model = make_net()
    params = dict(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    converted, report = customops.convert(model, inplace=True, return_report=True)
    assert converted is model and len(report) == len(SWAPPED)
    assert type(model.features[0]) is customops.DepthwiseConv2d
    assert dict(converted.named_parameters()).keys() == params.keys()
    for name, p in converted.named_parameters():
        assert p is params[name], name
    old = model.block.dw.weight.detach().clone()
    forward_and_grads(model, make_input())
    opt.step()
    assert not torch.equal(model.block.dw.weight, old)  # the optimizer updates the converted layer


def test_state_dict_round_trip():
    original = make_net()
    converted = customops.convert(original, conv2d=True)
    assert list(converted.state_dict()) == list(original.state_dict())
    fresh = make_net()  # other random weights
    converted.load_state_dict(fresh.state_dict())
    for name, value in fresh.state_dict().items():
        assert torch.equal(converted.state_dict()[name], value), name
    original.load_state_dict(converted.state_dict())
    x = make_input()
    assert_outputs_close(converted(x), original(x))


def test_rng_state_is_not_consumed():
    """The new modules are built on the meta device, so their own (discarded)
    initialisation draws no random numbers."""
    model = make_net()
    state = torch.get_rng_state()
    customops.convert(model, conv2d=True)
    assert torch.equal(torch.get_rng_state(), state)


# ---------------------------------------------------------------- what carries over


def test_dtype_memory_format_buffers_and_training_mode_carry_over():
    model = make_net(torch.float32).to(memory_format=torch.channels_last)
    model.eval()
    model.block.train()
    model.features[1].register_buffer("calls", torch.zeros(3, dtype=torch.int64))
    model.features[1].register_buffer("scratch", torch.ones(2), persistent=False)
    converted = customops.convert(model, conv2d=True)
    modules = modules_by_name(converted)
    for name, m in model.named_modules():
        assert modules[name].training == m.training, name
    for name, p in converted.named_parameters():
        assert p.dtype == torch.float32 and p.device.type == "cpu"
        if p.dim() == 4:
            assert p.is_contiguous(memory_format=torch.channels_last), name
    assert not converted.stem[0].weight.is_contiguous()  # (8, 4, 3, 3): the two formats differ
    dw = converted.features[1]
    assert type(dw) is customops.DepthwiseConv2d
    assert torch.equal(dw.calls, torch.zeros(3, dtype=torch.int64)) and torch.equal(dw.scratch, torch.ones(2))
    assert "features.1.calls" in converted.state_dict() and "features.1.scratch" not in converted.state_dict()
    x = make_input(torch.float32).to(memory_format=torch.channels_last)
    assert_outputs_close(converted(x), model(x), **TOLERANCES[torch.float32])


@pytest.mark.parametrize("inplace", [False, True])
def test_hooks_keep_running(inplace):
    model = make_net()
    calls = {"pre": 0, "fwd": 0, "bwd": 0, "sd": 0, "load": []}

    def pre(module, args):
        calls["pre"] += 1

    def fwd(module, args, out):
        calls["fwd"] += 1
        return out * 2  # the hook's result is the layer's output

    def bwd(module, grad_in, grad_out):
        calls["bwd"] += 1

    def sd(module, state_dict, prefix, local_metadata):
        calls["sd"] += 1

    def load(module, *args):
        calls["load"].append(module)

    dw, up = model.block.dw, model.resize["half_pixel"]
    handles = [dw.register_forward_pre_hook(pre), dw.register_forward_hook(fwd), up.register_forward_hook(fwd),
               dw.register_full_backward_hook(bwd), dw.register_state_dict_post_hook(sd),
               dw.register_load_state_dict_pre_hook(load)]
    x = make_input()
    want = forward_and_grads(model, x)
    calls.update(pre=0, fwd=0, bwd=0)
    converted = customops.convert(model, inplace=inplace)
    del dw, up
    assert type(converted.block.dw) is customops.DepthwiseConv2d
    got = forward_and_grads(converted, x)
    assert calls["pre"] == 1 and calls["fwd"] == 2 and calls["bwd"] == 1
    assert_outputs_close(got[0], want[0])  # the hooks' doubling applies to the new layers
    torch.testing.assert_close(got[1], want[1])
    sd_calls = calls["sd"]
    state = converted.state_dict()
    assert calls["sd"] == sd_calls + 1
    converted.load_state_dict(state)
    assert calls["load"][-1] is converted.block.dw  # with-module hooks see the new layer
    if inplace:  # the handles still remove the hooks from the new layers
        for h in handles:
            h.remove()
        calls.update(pre=0, fwd=0, bwd=0)
        forward_and_grads(converted, x)
        assert calls["pre"] == 0 and calls["fwd"] == 0 and calls["bwd"] == 0


# ---------------------------------------------------------------- TorchScript, torch.compile, torch.export


def test_converted_model_scripts_and_matches():
    original = make_net().eval()
    converted = customops.convert(original, conv2d=True)
    scripted = torch.jit.script(converted)
    assert "customops::depthwise_conv2d" in str(scripted.block.dw.inlined_graph)
    x = make_input()
    assert_outputs_close(scripted(x), original(x))


def test_converted_model_compiles_with_fullgraph_and_matches():
    """Dynamo traces the converted model in one graph, with symbolic sizes, through
    the Meta kernels and AOT autograd; aot_eager keeps this test fast on a small CPU
    (test_ops compiles each op with Inductor, the CUDA variant below the model)."""
    original = make_net(torch.float32).eval()
    converted = customops.convert(original, conv2d=True)
    compiled = torch.compile(converted, fullgraph=True, dynamic=True, backend="aot_eager")
    for shape in [(2, 4, 12, 10), (1, 4, 16, 14)]:
        x = torch.randn(shape)
        with torch.no_grad():
            assert_outputs_close(compiled(x), original(x), **TOLERANCES[torch.float32])


def test_converted_model_exports_and_matches():
    original = make_net(torch.float32).eval()
    converted = customops.convert(original, conv2d=True)
    x = make_input(torch.float32)
    exported = torch.export.export(converted, (x,))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert {"customops.depthwise_conv2d.default", "customops.conv2d.default",
            "customops.upsample_bilinear2d.default"} <= targets
    with torch.no_grad():
        assert_outputs_close(exported.module()(x), original(x), **TOLERANCES[torch.float32])


# ---------------------------------------------------------------- coordinate_mode


def tf1_resize_bilinear(x: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    """TF1 resize_bilinear(align_corners=False), in plain PyTorch: output index o
    samples src = o * in/out, between floor(src) and the next row (both clamped
    to the last index)."""

    def taps(n_in: int, n_out: int):
        src = torch.arange(n_out, dtype=torch.float64) * (n_in / n_out)
        lo = src.floor()
        i0 = lo.long().clamp(max=n_in - 1)
        return i0, (i0 + 1).clamp(max=n_in - 1), (src - lo).to(x.dtype)

    y0, y1, ly = taps(x.shape[2], out_h)
    x0, x1, lx = taps(x.shape[3], out_w)
    rows = x[:, :, y0, :] * (1 - ly)[:, None] + x[:, :, y1, :] * ly[:, None]
    return rows[:, :, :, x0] * (1 - lx) + rows[:, :, :, x1] * lx


class Resizes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")
        self.to_size = nn.Upsample(size=(7, 13), mode="bilinear", align_corners=True)
        self.fraction = nn.Upsample(scale_factor=(1.5, 0.75), mode="bilinear")
        self.bilinear = nn.UpsamplingBilinear2d(scale_factor=3)
        self.nearest = nn.Upsample(scale_factor=2)

    def forward(self, x: torch.Tensor):
        return self.up(x), self.to_size(x), self.fraction(x), self.bilinear(x), self.nearest(x)


def test_coordinate_mode_asymmetric_gives_tf1_resize():
    model = Resizes().double()
    converted, report = customops.convert(model, coordinate_mode="asymmetric", return_report=True)
    assert {s.name for s in report.swapped} == {"up", "to_size", "fraction", "bilinear"}
    assert [s.name for s in report.skipped] == ["nearest"]
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    up, to_size, fraction, bilinear, nearest = converted(x)
    torch.testing.assert_close(up, tf1_resize_bilinear(x, 10, 12))
    torch.testing.assert_close(to_size, tf1_resize_bilinear(x, 7, 13))
    torch.testing.assert_close(fraction, tf1_resize_bilinear(x, 7, 4))  # floor(5 * 1.5), floor(6 * 0.75)
    torch.testing.assert_close(bilinear, tf1_resize_bilinear(x, 15, 18))
    torch.testing.assert_close(nearest, model.nearest(x))
    assert (up - model.up(x)).abs().max() > 1e-2  # a change of numerics, as documented


@pytest.mark.parametrize("mode", ["half_pixel", "align_corners"])
def test_coordinate_mode_forces_pytorch_conventions(mode):
    model = Resizes().double()
    converted = customops.convert(model, coordinate_mode=mode)
    x = torch.randn(1, 2, 6, 4, dtype=torch.float64)
    align = mode == "align_corners"
    want = F.interpolate(x, size=(7, 13), mode="bilinear", align_corners=align)
    torch.testing.assert_close(converted.to_size(x), want)
    want = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=align)
    torch.testing.assert_close(converted.up(x), want)


# ---------------------------------------------------------------- CUDA


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cuda_model_converts_and_matches(dtype):
    original = make_net(dtype, "cuda")
    converted, report = customops.convert(original, conv2d=True, return_report=True)
    assert len(report) == len(SWAPPED) + len(PLAIN_CONVS)
    for p in converted.parameters():
        assert p.is_cuda and p.dtype == dtype
    x = make_input(dtype, "cuda")
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # cuDNN's float32 default is TF32
        want = forward_and_grads(original, x)
        got = forward_and_grads(converted, x)
        tol = TOLERANCES[dtype]
        assert_outputs_close(got[0], want[0], **tol)
        torch.testing.assert_close(got[1], want[1], **tol)
        for name in want[2]:
            torch.testing.assert_close(got[2][name], want[2][name], **tol, msg=lambda m: f"{name}: {m}")
        compiled = torch.compile(converted, fullgraph=True)
        with torch.no_grad():
            assert_outputs_close(compiled(x), original(x), **tol)
