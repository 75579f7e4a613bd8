"""Functional API. Each function calls one registered operator, so it works in
eager mode, under torch.compile and torch.export, and inside TorchScript."""

from __future__ import annotations

import math
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch._jit_internal import BroadcastingList2


def _int_pair(v: BroadcastingList2[int]) -> list[int]:
    """(height, width) from an int or a pair. int() specialises the values when
    torch.compile(dynamic=True) made them symbolic: window parameters are
    configuration, not shapes, and the schemas take them as int[2]."""
    if isinstance(v, int):
        return [int(v), int(v)]
    return [int(e) for e in v]


def _is_int(v) -> bool:
    # torch.compile(dynamic=True) hands symbolic ints to the wrappers.
    return isinstance(v, (int, torch.SymInt))


def _overview(text: str, layouts: Tuple[str, str, str]):
    """Attaches the op's lines in the generated tables of the docs (MyST Markdown) to the function: ``text``, its
    line in the operator table (``overview``), and ``layouts``, what it does with NCHW and with channels_last inputs
    and the memory format of its result (the table of docs/guide/memory_formats.md). The docs build reads them
    there, so a new op's lines come with its function."""

    def attach(function):
        function.overview = text
        function.layouts = layouts
        return function

    return attach


_NO_PADDING = object()


def _check_args(op: str, tensors=(), pairs=(), optional=(), padding=_NO_PADDING) -> None:
    """The wrappers' own arguments checked in eager mode and under torch.compile (TorchScript's types check them,
    and leave this out: it is only called under `not torch.jit.is_scripting()`), so that a wrong type fails with
    the argument's name rather than with a TypeError, IndexError or AttributeError of the code that reads it.
    tensors: (name, value, least dimensions) where the wrapper reads the tensor's shape; pairs: (name, value) of
    int-or-pair arguments, `optional` ones also None; padding: a convolution's. A pair of another length fails
    with the op's own message, before the wrapper indexes it."""
    for name, t, dims in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"customops.{op}: expected {name} to be a tensor, got {type(t).__name__}")
        if t.dim() < dims:
            raise RuntimeError(f"customops::{op}: expected {name} to be a 4-D tensor, got {t.dim()}-D")
    for name, v in [*pairs, *((n, v) for n, v in optional if v is not None)]:
        if _is_int(v):
            continue
        if not isinstance(v, (list, tuple)) or not all(_is_int(e) for e in v):
            raise TypeError(f"customops.{op}: expected {name} to be an int or a pair of ints, got {v!r}")
        if len(v) != 2:
            raise RuntimeError(f"customops::{op}: expected {name} to have 2 elements (height, width), got {len(v)}")
    if padding is not _NO_PADDING and not isinstance(padding, str) and not _is_int(padding):
        if not isinstance(padding, (list, tuple)) or len(padding) != 2 or not all(_is_int(e) for e in padding):
            raise TypeError(f"customops.{op}: expected padding to be an int, a pair of ints, 'same' or 'valid', "
                            f"got {padding!r}")


def _padding_sides(padding: Union[str, int, List[int], Tuple[int, int]], kernel_size: List[int],
                   stride: List[int], dilation: List[int]) -> List[List[int]]:
    """(before, after) padding per spatial dimension, as F.conv2d reads its
    padding argument, with F.conv2d's errors. 'same' pads d*(k-1) in all, the
    odd one after (bottom, right), as ATen's conv_padding_same."""
    if isinstance(padding, str):
        if padding == "valid":
            return [[0, 0], [0, 0]]
        if padding != "same":
            raise RuntimeError("Invalid padding string: '" + padding + "'")
        if stride[0] != 1 or stride[1] != 1:
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        sides: List[List[int]] = []
        for i in range(2):
            total = dilation[i] * (kernel_size[i] - 1)
            sides.append([total // 2, total - total // 2])
        return sides
    # One branch per type: TorchScript refines a Union only through isinstance.
    elif isinstance(padding, int):
        return [[int(padding), int(padding)], [int(padding), int(padding)]]
    elif isinstance(padding, list):
        return [[int(padding[0]), int(padding[0])], [int(padding[1]), int(padding[1])]]
    else:
        return [[int(padding[0]), int(padding[0])], [int(padding[1]), int(padding[1])]]


def _pad_for_conv(op: str, input: Tensor, sides: List[List[int]]) -> Tuple[Tensor, List[int]]:
    """The input and the symmetric padding for the op: the kernels pad both
    sides alike, so the extra row/column of an asymmetric 'same' is added here."""
    (top, bottom), (left, right) = sides[0], sides[1]
    # An input of the wrong rank goes to the op unpadded, for its own error.
    if (bottom != top or right != left) and input.dim() in (3, 4):
        if not torch.jit.is_scripting():
            _check_padded_fits(op, input, [bottom - top, right - left])
        input = torch.nn.functional.pad(input, [0, right - left, 0, bottom - top])
    return input, [top, left]


def _check_padded_fits(op: str, input: Tensor, extra: List[int]) -> None:
    """F.pad of a huge (expanded) input fails in its stride computation with a
    message naming nothing; say which argument it was, as the op would."""
    sizes = [*input.shape[:-2], input.shape[-2] + extra[0], input.shape[-1] + extra[1]]
    count = input.element_size()
    for s in sizes:
        count *= max(s, 1)
    if count >= 2**63:
        raise RuntimeError(f"customops::{op}: input padded for padding='same' to sizes {sizes} overflows int64")


@_overview("`x * sigmoid(1.702 x)` in one pass; finite for every finite `x`",
           layouts=("any dense layout, native",
                    "native",
                    "the input's"))
def quick_gelu(x: Tensor) -> Tensor:
    r"""Sigmoid approximation of GELU: ``y = x * sigmoid(1.702 * x)``.

    One fused pass over memory on CPU (vectorised) and CUDA, in place of the three
    that ``x * torch.sigmoid(1.702 * x)`` takes. Finite for every finite input.

    Args:
        x: float16, bfloat16, float32 or float64 tensor of any shape, on CPU or
            CUDA. Half-precision inputs are computed in float32.

    Returns:
        A tensor like ``x``; a dense ``x`` (contiguous, channels_last,
        transposed) keeps its memory layout. Differentiable, twice.

    Example::

        >>> import torch, customops
        >>> customops.quick_gelu(torch.tensor([-1.0, 0.0, 2.0]))
        tensor([-0.1542,  0.0000,  1.9357])
    """
    return torch.ops.customops.quick_gelu(x)


@_overview("sliding-window columns, same result and layout as `F.unfold`; batched `(N, C, H, W)` or unbatched "
           "`(C, H, W)`; its gradient is `col2im`",
           layouts=("native",
                    "read through strides",
                    "`(N, C·kh·kw, L)` columns, as `F.unfold`"))
def im2col(
    input: Tensor,
    kernel_size: BroadcastingList2[int],
    dilation: BroadcastingList2[int] = 1,
    padding: BroadcastingList2[int] = 0,
    stride: BroadcastingList2[int] = 1,
) -> Tensor:
    r"""Sliding-window columns of an image: the same result and layout as
    :func:`torch.nn.functional.unfold`.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; float16, bfloat16,
            float32 or float64, on CPU or CUDA. Any memory layout.
        kernel_size, dilation, padding, stride: an int or a pair ``(height, width)``;
            kernel_size, dilation and stride at least 1, padding at least 0.

    Returns:
        ``(N, C*kh*kw, L)`` (or ``(C*kh*kw, L)``), contiguous, where
        ``L = out_h * out_w`` and ``out_h = (H + 2*ph - dh*(kh-1) - 1) // sh + 1``.
        Rows are ordered ``(c, i, j)``, columns ``(oh, ow)``; padding reads as zero.
        Its gradient is :func:`col2im`.
    """
    if not torch.jit.is_scripting():
        _check_args("im2col", pairs=[("kernel_size", kernel_size), ("dilation", dilation), ("padding", padding),
                                     ("stride", stride)])
    return torch.ops.customops.im2col(
        input, _int_pair(kernel_size), _int_pair(dilation), _int_pair(padding), _int_pair(stride)
    )


@_overview("sums columns into an image, as `F.fold`; deterministic (no atomics); its gradient is `im2col`",
           layouts=("— (takes `(N, C·kh·kw, L)` columns)",
                    "—",
                    "NCHW image, as `F.fold`"))
def col2im(
    input: Tensor,
    output_size: BroadcastingList2[int],
    kernel_size: BroadcastingList2[int],
    dilation: BroadcastingList2[int] = 1,
    padding: BroadcastingList2[int] = 0,
    stride: BroadcastingList2[int] = 1,
) -> Tensor:
    r"""Sums sliding-window columns back into an image: the same result as
    :func:`torch.nn.functional.fold`, and the adjoint of :func:`im2col`.

    Args:
        input: ``(N, C*kh*kw, L)`` or unbatched ``(C*kh*kw, L)``, with ``L`` the
            number of windows that fit ``output_size``.
        output_size: ``(H, W)`` of the image, or an int for both.
        kernel_size, dilation, padding, stride: as for :func:`im2col`.

    Returns:
        ``(N, C, H, W)`` (or ``(C, H, W)``). Each pixel sums its window entries in a
        fixed order (no atomics), so results are identical run to run on CPU and CUDA.
    """
    if not torch.jit.is_scripting():
        _check_args("col2im", pairs=[("output_size", output_size), ("kernel_size", kernel_size),
                                     ("dilation", dilation), ("padding", padding), ("stride", stride)])
    if isinstance(output_size, int):  # the schema's SymInt[2] does not broadcast an int
        output_size = [output_size, output_size]
    return torch.ops.customops.col2im(
        input, output_size, _int_pair(kernel_size), _int_pair(dilation), _int_pair(padding), _int_pair(stride)
    )


@_overview('`F.conv2d`, with its arguments (`padding` an int, a pair, `"same"` or `"valid"`; unbatched input); the '
           "module takes `nn.Conv2d`'s, `padding_mode` included; algorithms: {doc}`/design/conv2d`",
           layouts=("native on the im2col + GEMM path (CPU; CUDA where no faster kernel applies); on CUDA the "
                    "implicit-GEMM and direct grouped kernels, and in the half types the stem kernels where the "
                    "windows overlap, take it through a tiled transpose to NHWC and back",
                    "native on CUDA where the implicit-GEMM, direct grouped, stem or TF32 weight-gradient kernels "
                    "apply ({doc}`/design/conv2d`), otherwise converted to NCHW for im2col and back",
                    "the input's"))
def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: BroadcastingList2[int] = 1,
    padding: Union[str, int, List[int], Tuple[int, int]] = 0,
    dilation: BroadcastingList2[int] = 1,
    groups: int = 1,
) -> Tensor:
    r"""2-D convolution, equal to :func:`torch.nn.functional.conv2d` for the same
    arguments.

    On CPU it is im2col + GEMM (BLAS). On CUDA it picks an algorithm per call and
    per pass: implicit-GEMM kernels (CUTLASS, compute capability 9.0), direct
    kernels for grouped convolutions, few-channel stems and weight gradients, or
    im2col + cuBLAS; ``TORCH_CPP_LOG_LEVEL=INFO`` logs each choice. The im2col
    path builds its column buffer a chunk of the batch at a time, so the extra
    memory stays under ``CUSTOMOPS_CONV2D_WORKSPACE_MIB`` (default 256 MiB; at
    least one image's columns) whatever the batch size; the other algorithms, and
    1x1 stride-1 unpadded convolutions, allocate no columns.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; float16, bfloat16,
            float32 or float64, on CPU or CUDA. Any memory layout.
        weight: ``(O, C/groups, kh, kw)``, same dtype and device.
        bias: ``(O,)`` or None.
        stride, dilation: an int or a pair ``(height, width)``.
        padding: an int, a pair, ``"valid"`` (none) or ``"same"`` (output size = input
            size; stride 1 only, else RuntimeError as ``F.conv2d``). An odd total
            ``dilation * (k - 1)`` puts the extra row/column at the bottom/right, as
            ``F.conv2d`` does; that one is padded by ``F.pad`` before the op.
        groups: divides both C and O.

    Returns:
        ``(N, O, out_h, out_w)`` (or unbatched), channels_last for a channels_last input, else
        contiguous (as ``F.conv2d``). Differentiable twice in
        input, weight and bias. On CUDA, float32 uses TF32 only where
        ``torch.backends.cuda.matmul.allow_tf32`` allows (off by default), unlike
        cuDNN convolutions, which follow ``torch.backends.cudnn.allow_tf32`` (on);
        the weight gradient of grouped convolutions that take the direct grouped
        kernels (groups of 4-32 channels) is computed in float32 either way.
    """
    if not torch.jit.is_scripting():
        _check_args("conv2d", tensors=[("input", input, 0), ("weight", weight, 2)],
                    pairs=[("stride", stride), ("dilation", dilation)], padding=padding)
    strides, dilations = _int_pair(stride), _int_pair(dilation)
    sides = _padding_sides(padding, [weight.shape[-2], weight.shape[-1]], strides, dilations)
    input, pads = _pad_for_conv("conv2d", input, sides)
    return torch.ops.customops.conv2d(input, weight, bias, strides, pads, dilations, int(groups))


@_overview("`F.conv2d(..., groups=C)` for weights `(C*m, 1, kh, kw)`, any kernel size; direct kernels, no "
           "im2col; deterministic weight gradient",
           layouts=("native",
                    "native kernels (CPU and CUDA: forward, input and weight gradient)",
                    "the input's (output and input gradient)"))
def depthwise_conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: BroadcastingList2[int] = 1,
    padding: Union[str, int, List[int], Tuple[int, int]] = 0,
    dilation: BroadcastingList2[int] = 1,
) -> Tensor:
    r"""Depthwise 2-D convolution: each input channel ``c`` is convolved with its
    own ``m`` filters, giving output channels ``c*m .. c*m+m-1``. Equal to
    ``torch.nn.functional.conv2d(input, weight, bias, stride, padding, dilation,
    groups=C)``, computed by direct kernels (no column buffer), for kernels of any
    size.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; float16, bfloat16,
            float32 or float64, on CPU or CUDA. Any memory layout.
        weight: ``(C*m, 1, kh, kw)`` for a channel multiplier ``m >= 1``.
        bias: ``(C*m,)`` or None.
        stride, dilation: an int or a pair ``(height, width)``.
        padding: an int, a pair, ``"valid"`` or ``"same"``, as for :func:`conv2d`.

    Returns:
        ``(N, C*m, out_h, out_w)`` (or unbatched), channels_last for a channels_last input (computed
        by NHWC kernels, no conversion), else contiguous. Differentiable twice.
        The weight gradient is reduced in a fixed order: identical run to run.
    """
    if not torch.jit.is_scripting():
        _check_args("depthwise_conv2d", tensors=[("input", input, 0), ("weight", weight, 2)],
                    pairs=[("stride", stride), ("dilation", dilation)], padding=padding)
    strides, dilations = _int_pair(stride), _int_pair(dilation)
    sides = _padding_sides(padding, [weight.shape[-2], weight.shape[-1]], strides, dilations)
    input, pads = _pad_for_conv("depthwise_conv2d", input, sides)
    return torch.ops.customops.depthwise_conv2d(input, weight, bias, strides, pads, dilations)


@_overview("bilinear resize of `(N, C, H, W)` by any ratio, in the coordinate conventions of ONNX Resize: "
           "`half_pixel` (= `F.interpolate(align_corners=False)`, TF2 `tf.image.resize`), `align_corners`, "
           "and `asymmetric` (= TF1 `resize_bilinear`, which PyTorch lacks); also takes `F.interpolate`'s "
           "keywords; a deterministic backward (gathers, no atomics), allowed under "
           "`torch.use_deterministic_algorithms(True)`",
           layouts=("native",
                    "native",
                    "the input's (the input gradient follows the output gradient's, as in PyTorch)"))
def upsample_bilinear2d(
    input: Tensor,
    output_size: Optional[BroadcastingList2[int]] = None,
    coordinate_mode: Optional[str] = None,
    scale_factor: Optional[BroadcastingList2[float]] = None,
    size: Optional[BroadcastingList2[int]] = None,
    mode: str = "bilinear",
    align_corners: Optional[bool] = None,
    recompute_scale_factor: Optional[bool] = None,
    antialias: bool = False,
) -> Tensor:
    r"""Bilinear resize of an ``(N, C, H, W)`` tensor, up or down by any ratio,
    with the source-coordinate convention of the framework a model must match.
    Also takes the keyword arguments of ``F.interpolate(mode="bilinear")``
    (``size``, ``scale_factor``, ``align_corners``, ``recompute_scale_factor``)
    with its results; positionally, the third argument is ``coordinate_mode``.

    Along each axis, output index ``o`` samples the input at ``src``:

    - ``"half_pixel"``: ``src = (o + 0.5) * in/out - 0.5``, clamped at 0. Equals
      ``F.interpolate(mode="bilinear", align_corners=False)`` and TensorFlow 2's
      ``tf.image.resize`` (``resize_bilinear(half_pixel_centers=True)``).
    - ``"align_corners"``: ``src = o * (in - 1)/(out - 1)``. Equals
      ``align_corners=True`` in PyTorch and TensorFlow.
    - ``"asymmetric"``: ``src = o * in/out``. Equals TensorFlow 1.x
      ``tf.image.resize_bilinear(align_corners=False)``, the legacy default of many
      deployed TF-Lite models; PyTorch has no equivalent.

    ``src`` blends input indices ``floor(src)`` and the next one (both clamped to
    the last index) with weights ``1 - l`` and ``l``, ``l = src - floor(src)``.

    Args:
        input: ``(N, C, H, W)``; float16, bfloat16, float32 or float64, on CPU or
            CUDA. A channels_last input gives a channels_last result.
        output_size: ``(out_h, out_w)``, or an int for both. ``size`` is the same
            argument under ``F.interpolate``'s name.
        coordinate_mode: ``"half_pixel"``, ``"align_corners"`` or ``"asymmetric"``;
            by default ``"align_corners"`` if ``align_corners`` is True, else
            ``"half_pixel"`` (``F.interpolate``'s default).
        scale_factor: instead of ``output_size``: ``out = floor(in * scale_factor)``
            per axis (a float, or a pair). As in ``F.interpolate``, unless
            ``recompute_scale_factor=True`` the half_pixel mapping then uses
            ``1/scale_factor`` in place of ``in/out``; the two differ when ``in *
            scale_factor`` is not a whole number, and the kernels of this op take
            only sizes, so those calls run PyTorch's own bilinear kernel (equal to
            ``F.interpolate``; its CUDA backward is not deterministic). align_corners
            ignores the scale, as in PyTorch; asymmetric (TensorFlow, which has no
            scale factors) uses ``in/out`` and refuses ``recompute_scale_factor=False``
            where the two differ.
        mode: ``"bilinear"`` only (``F.interpolate``'s argument; others raise).
        align_corners: ``F.interpolate``'s flag, an alternative to ``coordinate_mode``.
        recompute_scale_factor: ``True``: the mapping uses ``in/out`` (see scale_factor).
        antialias: ``True`` raises: antialiased downsampling is not implemented.

    Returns:
        ``(N, C, out_h, out_w)``. Differentiable (twice); the backward gathers the
        gradient for each input pixel in a fixed order (no atomics), so it gives
        bit-identical results run to run and runs under
        ``torch.use_deterministic_algorithms(True)``, on CPU and CUDA.
    """
    if not torch.jit.is_scripting():
        _check_args("upsample_bilinear2d", tensors=[("input", input, 0)],
                    optional=[("output_size", output_size), ("size", size)])
    if antialias:
        raise ValueError("upsample_bilinear2d: antialias=True is not supported (no antialiasing filter); "
                         "use torch.nn.functional.interpolate for antialiased resizing")
    if mode != "bilinear":
        raise ValueError("upsample_bilinear2d: mode must be 'bilinear', got '" + mode + "'")
    if size is not None:
        if output_size is not None:
            raise ValueError("upsample_bilinear2d: give output_size or size (its F.interpolate name), not both")
        output_size = size
    if coordinate_mode is None:
        coordinate_mode = "align_corners" if align_corners is not None and align_corners else "half_pixel"
    elif align_corners is not None and align_corners != (coordinate_mode == "align_corners"):
        raise ValueError("upsample_bilinear2d: coordinate_mode='" + coordinate_mode + "' contradicts align_corners="
                         + str(align_corners))
    if output_size is not None and scale_factor is not None:
        raise ValueError("upsample_bilinear2d: give output_size or scale_factor, not both")
    if output_size is not None:
        if recompute_scale_factor is not None and recompute_scale_factor:
            raise ValueError("upsample_bilinear2d: recompute_scale_factor is not meaningful with an explicit size")
        out_size = _int_pair(output_size)
    elif scale_factor is not None:
        scales = [float(scale_factor), float(scale_factor)] if isinstance(scale_factor, float) else \
            [float(s) for s in scale_factor]
        out_size = [int(math.floor(float(input.shape[-2]) * scales[0])),
                    int(math.floor(float(input.shape[-1]) * scales[1]))]
        if (recompute_scale_factor is None or not recompute_scale_factor) and coordinate_mode != "align_corners" \
                and not _scale_is_ratio(input, scales, out_size):
            # Inputs the op refuses (not 4-D, empty result) go on to it for its message.
            if coordinate_mode == "half_pixel" and input.dim() == 4 and out_size[0] > 0 and out_size[1] > 0:
                return torch.nn.functional.interpolate(input, scale_factor=scales, mode="bilinear",
                                                       align_corners=False, recompute_scale_factor=False)
            if recompute_scale_factor is not None:
                raise ValueError("upsample_bilinear2d: coordinate_mode='asymmetric' maps with in/out; "
                                 "recompute_scale_factor=False asks for 1/scale_factor, which differs here "
                                 "(in * scale_factor is not a whole number)")
    else:
        raise ValueError("upsample_bilinear2d: give output_size or scale_factor")
    return torch.ops.customops.upsample_bilinear2d(input, out_size, coordinate_mode)


def _scale_is_ratio(input: Tensor, scales: List[float], out_size: List[int]) -> bool:
    """Whether 1/scale equals in/out on both axes (in * scale whole). A whole
    scale is checked without the sizes, so that symbolic sizes under
    torch.compile(dynamic=True) add no guard."""
    for i in range(2):
        s = scales[i]
        if s != float(math.floor(s)) and float(input.shape[i - 2]) * s != float(out_size[i]):
            return False
    return True


@_overview("NeRF-style: feats `(N, 8, F)`, points `(N, 3)` in `[-1, 1]` → `(N, F)`; gradients for feats and "
           "points, which may have different dtypes",
           layouts=("— (`(N, 8, F)`, `(N, 3)`)",
                    "—",
                    "contiguous"))
def trilinear_interpolation(feats: Tensor, points: Tensor) -> Tensor:
    r"""NeRF-style trilinear interpolation of each point's 8 cube-corner features.

    With ``u, v, w = (points + 1) / 2`` per point,
    ``out = (1-u)(a f0 + b f1 + c f2 + d f3) + u(a f4 + b f5 + c f6 + d f7)``,
    ``a = (1-v)(1-w), b = (1-v)w, c = v(1-w), d = vw``: corner ``k`` has bits
    ``(x, y, z) = (k>>2 & 1, k>>1 & 1, k & 1)``. Points outside ``[-1, 1]`` follow
    the same formula, i.e. they extrapolate linearly along each axis (no clamping).

    Args:
        feats: ``(N, 8, F)``; float16, bfloat16, float32 or float64, on CPU or CUDA.
        points: ``(N, 3)`` local coordinates on feats' device, of any of those
            dtypes (it need not be feats'), e.g. float32 points with bfloat16
            feats under ``torch.autocast``.

    Returns:
        ``(N, F)`` of feats' dtype, contiguous: feats are the values being
        interpolated and the bulk of the memory traffic. Computed in feats'
        dtype, float32 for half types (so float64 points with float32 feats
        compute in float32); the points are read at their own precision,
        never rounded to a half type, since a half coordinate in ``[-1, 1]``
        keeps only about 3 digits. Differentiable (twice) in feats and in
        points; the gradients have the dtype of their input, so they reach
        float32 parameters as float32. The points' gradient is what pose and
        grid refinement need.
    """
    return torch.ops.customops.trilinear_interpolation(feats, points)
