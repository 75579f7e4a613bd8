"""A RepLKNet-style stage (Ding et al., "Scaling Up Your Kernels to 31x31", CVPR 2022), for the model benchmark.

The defaults are RepLKNet-31B's first stage: 128 channels at 56x56 (a 224x224 image after the stride-4 stem),
two layers of a large-kernel block (31x31 depthwise) and a ConvFFN (expansion 4). Large depthwise kernels are
where PyTorch's depthwise convolution is slowest, so this stage isolates them in a realistic setting: the
1x1 convolutions, batch norms and activations around them stay plain PyTorch in both the original and the
converted model.

At batch 64 (the CUDA default of ``python -m customops.benchmark.models``, as for convnext_tiny) a float32
training step saves 4.5 GB of activations for the backward (73 MB an image, counted on CPU), far inside an
80 GB GPU; a larger batch would mostly lengthen the run, as each convolution already writes 25.7M outputs.
The stage's parameters take 2.2 MB. Written for this benchmark (not the reference implementation); drop-path,
which only skips branches at random, is left out.
"""

from __future__ import annotations

from torch import Tensor, nn

CHANNELS = 128
RESOLUTION = 56
DEPTH = 2
KERNEL_SIZE = 31
SMALL_KERNEL_SIZE = 5


def conv_bn(in_channels: int, out_channels: int, kernel_size: int, groups: int = 1) -> nn.Sequential:
    """A bias-free convolution with "same" padding followed by batch norm (RepLKNet's conv_bn)."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_channels))


class LargeKernelConv(nn.Module):
    """Depthwise kxk conv + BN, plus a parallel small-kernel depthwise conv + BN, summed.

    In RepLKNet the small branch is folded into the large kernel after training (structural
    re-parameterisation); during training, as here, both run.
    """

    def __init__(self, channels: int, kernel_size: int, small_kernel_size: int) -> None:
        super().__init__()
        self.large = conv_bn(channels, channels, kernel_size, groups=channels)
        self.small = conv_bn(channels, channels, small_kernel_size, groups=channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.large(x) + self.small(x)


class RepLKBlock(nn.Module):
    """x + 1x1(ReLU(LargeKernelConv(ReLU(BN(1x1(BN(x)))))))."""

    def __init__(self, channels: int, kernel_size: int, small_kernel_size: int) -> None:
        super().__init__()
        self.pre_bn = nn.BatchNorm2d(channels)
        self.pw1 = nn.Sequential(conv_bn(channels, channels, 1), nn.ReLU())
        self.large_kernel = LargeKernelConv(channels, kernel_size, small_kernel_size)
        self.act = nn.ReLU()
        self.pw2 = conv_bn(channels, channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.pw2(self.act(self.large_kernel(self.pw1(self.pre_bn(x)))))


class ConvFFN(nn.Module):
    """x + 1x1(GELU(1x1(BN(x)))), expanding the channels by `ratio` in between."""

    def __init__(self, channels: int, ratio: int = 4) -> None:
        super().__init__()
        self.pre_bn = nn.BatchNorm2d(channels)
        self.pw1 = conv_bn(channels, channels * ratio, 1)
        self.act = nn.GELU()
        self.pw2 = conv_bn(channels * ratio, channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.pw2(self.act(self.pw1(self.pre_bn(x))))


class RepLKStage(nn.Module):
    """`depth` layers of (RepLKBlock, ConvFFN) at a fixed width and resolution; input and output (N, C, H, W)."""

    def __init__(self, channels: int = CHANNELS, depth: int = DEPTH, kernel_size: int = KERNEL_SIZE,
                 small_kernel_size: int = SMALL_KERNEL_SIZE, ffn_ratio: int = 4) -> None:
        super().__init__()
        self.channels = channels
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [RepLKBlock(channels, kernel_size, small_kernel_size), ConvFFN(channels, ffn_ratio)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)
