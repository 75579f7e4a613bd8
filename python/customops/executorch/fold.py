"""im2col as customops.litert's strided slices of the padded image (data movement only); col2im as their
adjoint: each window tap's columns added into a zero image at that tap's strided positions (``slice_scatter``),
then the padding cut off. Exact, and in core ATen operators ExecuTorch's portable kernels run (ATen's own col2im
decomposition ends in a negative ``constant_pad_nd``, which they refuse)."""

from __future__ import annotations

import torch

from .._windows import equivalent_window
from ..litert.fold import im2col


def col2im(input: torch.Tensor, output_size, kernel_size, dilation, padding, stride) -> torch.Tensor:
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    (h, w), (kh, kw), (ph, pw) = output_size, kernel_size, padding
    hp, wp = h + 2 * ph, w + 2 * pw
    (sh, dh), (sw, dw) = (equivalent_window(int(size), k, s, 0, d)
                          for size, k, s, d in zip((hp, wp), kernel_size, stride, dilation))
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    n, c = x.shape[0], x.shape[1] // (kh * kw)
    cols = x.reshape(n, c, kh, kw, oh, ow)
    scatter = torch.ops.aten.slice_scatter
    image = x.new_zeros(n, c, hp, wp)
    for i in range(kh):
        rows = (i * dh, i * dh + (oh - 1) * sh + 1, sh)
        band = image[:, :, rows[0]:rows[1]:rows[2]]
        for j in range(kw):
            columns = (j * dw, j * dw + (ow - 1) * sw + 1, sw)
            tap = band[:, :, :, columns[0]:columns[1]:columns[2]] + cols[:, :, i, j]
            band = scatter(band, tap, 3, *columns)
        image = scatter(image, band, 2, *rows)
    y = image[:, :, ph:ph + h, pw:pw + w]
    return y.squeeze(0) if unbatched else y


DECOMPOSITIONS = {"im2col": im2col, "col2im": col2im}
# customops' kernels (kernels/executorch/fold.cpp, the CPU kernels' loops) where the kernel library is found:
# the decompositions above are a copy per tap, where the kernels make one pass.
KERNELS = {"im2col": "kernel", "col2im": "kernel"}
