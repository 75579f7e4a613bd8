"""The convolutions in compiled graphs: depthwise_conv2d's passes, per call, where eager would run them
(conv2d stays whole: Inductor has no convolution code of its own, and ours wins where it is used).

On CUDA each pass of a depthwise layer (forward, input gradient, weight and bias gradients) runs customops'
kernels or PyTorch's convolution, by the rule or the benchmark mode's timing (:mod:`customops.backends`). In a
compiled graph the same choice is made once, when the graph is traced, from the call's sizes (their hints under
dynamic shapes). A pass given to PyTorch becomes ATen's ``convolution`` (forward) or ``convolution_backward``
(gradients), which Inductor treats as it treats ``nn.Conv2d``'s: its own layout choices, the bias gradient
generated as a reduction fused with its neighbours. A pass left to customops stays the op, without its bias:
the bias add and the bias gradient are written in ATen around it, so that Inductor fuses them too (the add with
the batch norm or activation that follows, the gradient's sum with the kernel that makes the output gradient).

Under ``torch.backends.cudnn.benchmark`` a shape not timed yet is timed when the graph is traced, by one eager
call of the op on random tensors of the call's sizes (the timing eager makes at a shape's first call, and the
same process-wide record of its result), without the bias: the call the graph makes where it keeps the op, which
then finds its choice made. CPU calls always run customops' kernels.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, List, Optional, Sequence

import torch
from torch._prims_common import suggest_memory_format
from torch.utils._python_dispatch import _disable_current_modes

from .._windows import equivalent_window
from ._common import opmath

OP = "depthwise_conv2d"
DECOMPOSED_BY_DEFAULT = True
# Where customops' kernels run (every pass on the CPU), the decomposed graph still calls the op, its bias outside.
KEEPS_THE_OP = True

aten = torch.ops.aten
_CUSTOMOPS, _PYTORCH = "customops", "pytorch"
# PyTorch's CUDA convolutions hold stride and dilation in 32 bits.
_INT32_MAX = 2**31 - 1


def _pair(v) -> List[int]:
    return [v, v] if isinstance(v, int) else list(v)


def _hint(v) -> int:
    """A size's value: a static size as it is, a symbolic one by its hint (no guard: the choice is not part of
    the graph's specialisation)."""
    if isinstance(v, int):
        return v
    from torch.fx.experimental import symbolic_shapes

    # optimization_hint from torch 2.15, hint_int before; a size without a hint (data-dependent) counts as large.
    hint = getattr(symbolic_shapes, "optimization_hint", None) or symbolic_shapes.hint_int
    return int(hint(v, fallback=8192))


def _channels_last(t: torch.Tensor) -> bool:
    """The kernels' result layout (kernels/conv2d.h: result_format)."""
    return t.dim() == 4 and suggest_memory_format(t) == torch.channels_last and not t.is_contiguous()


class _Call:
    """One call's geometry, batched, with the window PyTorch's kernels take: the stride and dilation of each axis
    replaced by their smallest equivalents (customops._windows.equivalent_window: the dilation of an axis of one
    tap 1, a stride past the last window the one just past it), so that a huge value that changes nothing reaches
    no 32-bit field. An axis of symbolic size keeps its stride."""

    def __init__(self, input: torch.Tensor, weight: torch.Tensor, stride, padding, dilation):
        self.batched = input.dim() == 4
        self.sizes = [_hint(s) for s in ((input.shape if self.batched else (1, *input.shape)))]
        self.weight_sizes = [_hint(s) for s in weight.shape]
        self.stride, self.padding, self.dilation = _pair(stride), _pair(padding), _pair(dilation)
        self.channels_last = _channels_last(input)
        self.format = torch.channels_last if self.channels_last else torch.contiguous_format
        known = [s if isinstance(s, int) else None for s in input.shape[-2:]]
        windows = [equivalent_window(known[i], self.weight_sizes[2 + i], self.stride[i], self.padding[i],
                                     self.dilation[i]) for i in range(2)]
        self.window_stride = [stride for stride, _ in windows]
        self.window_dilation = [dilation for _, dilation in windows]
        self.pytorch_can_run = max(*self.window_stride, *self.window_dilation) <= _INT32_MAX

    def batch(self, t: torch.Tensor) -> torch.Tensor:
        return t if self.batched else t.unsqueeze(0)

    def unbatch(self, t: torch.Tensor) -> torch.Tensor:
        return t if self.batched else t.squeeze(0)


# Where a pass may go to PyTorch: CUDA (eager's CPU calls always run customops' kernels).
_CHOOSING_DEVICES = ("cuda",)


def passes(input: torch.Tensor, weight: torch.Tensor, stride, padding, dilation) -> List[str]:
    """What a call with these tensors runs per pass (forward, input_grad, weight_grad): "customops" or
    "pytorch", decided as eager decides (:func:`customops.backends.describe_depthwise`)."""
    return _plan(input, weight, stride, padding, dilation)[1]


def _plan(input, weight, stride, padding, dilation):
    """The call's geometry and what it runs per pass."""
    call = _Call(input, weight, stride, padding, dilation)
    if input.device.type not in _CHOOSING_DEVICES or not call.pytorch_can_run:
        return call, [_CUSTOMOPS] * 3
    return call, _choose(call, input)


def _choose(call: _Call, input: torch.Tensor) -> List[str]:
    # Asked for the call without its bias: that is the op's call where the graph keeps it, so that in benchmark
    # mode the op finds, when it runs, the choice timed here under its own key (the rule ignores the bias).
    args = (call.sizes, call.weight_sizes, input.dtype, call.channels_last, False, call.stride, call.padding,
            call.dilation)
    device = input.device.index if input.device.index is not None else torch.cuda.current_device()
    lib = torch.ops.customops_backends
    # Outside the tracing modes: the question is not part of the graph.
    with _disable_current_modes():
        picks = list(lib.depthwise_conv2d_choice(*args, device))
        if "untimed" in picks:
            _time_eagerly(call, input, device, [p == "untimed" for p in picks])
            picks = list(lib.depthwise_conv2d_choice(*args, device))
        if "untimed" in picks:  # not timed after all (a stream being captured): the rule, as eager
            picks = [r if p == "untimed" else p for p, r in zip(picks, lib.depthwise_conv2d_rule(*args))]
    return picks


def _time_eagerly(call: _Call, input: torch.Tensor, device: int, untimed: Sequence[bool]) -> None:
    """Runs the op eagerly (without bias) on random tensors of the call's sizes, each untimed pass once: eager's
    benchmark mode times the pass and keeps its choice."""
    with torch.no_grad(), torch.autocast("cuda", enabled=False):
        options = {"device": torch.device("cuda", device), "dtype": input.dtype}
        x = torch.randn(call.sizes, **options).contiguous(memory_format=call.format)
        w = torch.randn(call.weight_sizes, **options)
        geometry = (call.stride, call.padding, call.dilation)
        out = torch.ops.customops.depthwise_conv2d(x, w, None, *geometry)
        if untimed[1] or untimed[2]:
            mask = [untimed[1], untimed[2], False]
            torch.ops.customops.depthwise_conv2d_backward(torch.randn_like(out), x, w, *geometry, mask)


_state = threading.local()


@contextlib.contextmanager
def _the_op() -> Iterator[None]:
    """While a decomposition calls the op itself: the tracer hands that call to the decompositions again, which
    must keep it as it is: it is the call the decision made."""
    _state.inside = True
    try:
        yield
    finally:
        _state.inside = False


def _inside() -> bool:
    return getattr(_state, "inside", False)


def _bias_add(out: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    compute = opmath(out.dtype)
    return (out.to(compute) + bias.to(compute)[:, None, None]).to(out.dtype)


def _bias_grad(grad_out: torch.Tensor) -> torch.Tensor:
    dims = [0, 2, 3] if grad_out.dim() == 4 else [1, 2]
    return grad_out.sum(dims, dtype=opmath(grad_out.dtype)).to(grad_out.dtype)


def depthwise_conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                     stride=1, padding=0, dilation=1):
    if _inside():
        return NotImplemented
    call, (forward, _, _) = _plan(input, weight, stride, padding, dilation)
    if forward == _PYTORCH:
        out = aten.convolution(call.batch(input), weight, bias, call.window_stride, call.padding,
                               call.window_dilation, False, [0, 0], input.shape[-3])
        return call.unbatch(out.contiguous(memory_format=call.format))
    if bias is None:
        return NotImplemented  # the call as it is: the traced graph keeps the op
    with _the_op():
        out = torch.ops.customops.depthwise_conv2d(input, weight, None, stride, padding, dilation)
    return _bias_add(out, bias)


def depthwise_conv2d_backward(grad_out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, stride, padding,
                              dilation, output_mask):
    if _inside():
        return NotImplemented
    want = [bool(m) for m in output_mask]
    call, (_, input_grad, weight_grad) = _plan(input, weight, stride, padding, dilation)
    # The bias gradient goes with the weight gradient (one reduction over the batch and the plane), as in eager.
    theirs = [want[0] and input_grad == _PYTORCH, want[1] and weight_grad == _PYTORCH,
              want[2] and weight_grad == _PYTORCH]
    ours = [want[0] and not theirs[0], want[1] and not theirs[1], False]
    our_bias = want[2] and not theirs[2]
    if not (any(theirs) or our_bias):
        return NotImplemented  # the call as it is: the traced graph keeps the op
    grads: List[Optional[torch.Tensor]] = [None, None, None]
    if any(ours):
        with _the_op():
            grads = list(torch.ops.customops.depthwise_conv2d_backward(grad_out, input, weight, stride, padding,
                                                                        dilation, ours))
    if our_bias:
        grads[2] = _bias_grad(grad_out)
    if any(theirs):
        g_input, g_weight, g_bias = aten.convolution_backward(
            call.batch(grad_out), call.batch(input), weight, [weight.shape[0]] if theirs[2] else None,
            call.window_stride, call.padding, call.window_dilation, False, [0, 0], input.shape[-3], theirs)
        if theirs[0]:
            grads[0] = call.unbatch(g_input.contiguous(memory_format=call.format))
        if theirs[1]:
            grads[1] = g_weight.contiguous()
        if theirs[2]:
            grads[2] = g_bias
    return tuple(grads)


DECOMPOSITIONS = {"depthwise_conv2d": depthwise_conv2d, "depthwise_conv2d_backward": depthwise_conv2d_backward}


_NCHW_ORDER = [3, 2, 1, 0]  # Inductor's stride order: each dimension's rank by stride, the smallest 0


def _kernel_order(x, fx_input) -> Optional[List[int]]:
    """The stride order the kernels compute in for the input ``x`` (an Inductor IR node): the one Inductor fixed
    for it, else the traced tensor's (kernels/conv2d.h: result_format). None off the batched 4-D case."""
    from torch._inductor import ir

    fake = fx_input.meta.get("val") if isinstance(fx_input, torch.fx.Node) else None
    if not isinstance(fake, torch.Tensor) or fake.dim() != 4:
        return None
    try:
        _, layout = ir.as_storage_and_layout(x, freeze=False)
    except NotImplementedError:  # not realized yet: Inductor has chosen nothing
        layout = None
    if layout is None or isinstance(layout, ir.FlexibleLayout):
        channels_last = _channels_last(fake)
    else:
        channels_last = layout.is_stride_ordered(ir.NHWC_STRIDE_ORDER) and not layout.is_contiguous()
    return ir.NHWC_STRIDE_ORDER if channels_last else _NCHW_ORDER


def _dense(x, order):
    from torch._inductor import ir

    return ir.ExternKernel.require_stride_order(x, order) if isinstance(x, ir.IRNode) else x


def _backward_layouts(fx_node, grad_out, input, *args, **kwargs):
    """The output gradient in the input's format, as the kernels read it. Left to Inductor, a gradient made by a
    fused kernel (a batch norm's backward) came NCHW beside a channels_last input, and the kernels copied it: a
    pass over the tensor per call (docs/design/compile.md). Asked for here, the fused kernel writes it so at once."""
    order = _kernel_order(input, fx_node.args[1])
    if order is not None:
        input, grad_out = _dense(input, order), _dense(grad_out, order)
    return (grad_out, input) + args, kwargs


# Inductor's layout constraints for the op where a graph keeps it (instead of the schema's flexible_layout).
LAYOUT_CONSTRAINTS = {"depthwise_conv2d_backward": _backward_layouts}


# This family's rows of the table in docs/design/compile.md (MyST Markdown): the op(s), what compiled graphs do
# with them, the measurement that made the choice, and why.
DOC_ROWS = [
    (
        "`depthwise_conv2d`",
        "per call, as eager chooses: ATen's convolution where PyTorch's kernel runs, else the op with its bias "
        "add outside it",
        "see {doc}`/performance/zoo`",
        "Inductor plans and fuses ATen's convolution as `nn.Conv2d`'s; the bias add fuses with what follows",
    ),
    (
        "`depthwise_conv2d_backward`",
        "per pass, as eager chooses: ATen's convolution backward where PyTorch's kernels run, else the op; the "
        "bias gradient a sum outside it",
        "see {doc}`/performance/zoo`",
        "the bias gradient's reduction fuses with the kernel that makes the output gradient",
    ),
]
