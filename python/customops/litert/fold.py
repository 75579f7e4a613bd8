"""im2col as strided slices of the padded image, one per window tap, stacked in F.unfold's row order
(STRIDED_SLICE, PACK, RESHAPE: data movement only, exact). col2im has no decomposition that TF-Lite runs:
ATen's becomes a scatter-add, which TF-Lite's kernels refuse."""

from __future__ import annotations

import torch

from .._windows import equivalent_window


def im2col(input, kernel_size, dilation, padding, stride):
    unbatched = input.dim() == 3
    x = input.unsqueeze(0) if unbatched else input
    (kh, kw), (ph, pw) = kernel_size, padding
    x = torch.nn.functional.pad(x, [pw, pw, ph, ph]) if ph or pw else x
    n, c, h, w = x.shape
    (sh, dh), (sw, dw) = (equivalent_window(int(size), k, s, 0, d)
                          for size, k, s, d in zip((h, w), kernel_size, stride, dilation))
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    taps = [x[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            for i in range(kh) for j in range(kw)]
    y = torch.stack(taps, 2).reshape(n, c * kh * kw, oh * ow)
    return y.squeeze(0) if unbatched else y


DECOMPOSITIONS = {"im2col": im2col}
