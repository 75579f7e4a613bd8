"""python -m customops.benchmark.kernels: the per-kernel comparison of a model's training step, on the CPU."""

import pytest
import torch

from customops.benchmark import kernels

pytestmark = pytest.mark.usefixtures("one_thread")


def test_profile_finds_the_swapped_operators():
    pytest.importorskip("torchvision")
    original, converted = kernels.compare("mobilenet_v2", "float32-nchw", torch.device("cpu"), steps=2, quick=True)
    # mobilenet_v2 has 17 depthwise layers: converted, each step runs our forward and backward 17 times.
    assert converted.calls.get("customops::depthwise_conv2d") == 17
    assert converted.calls.get("customops::depthwise_conv2d_backward") == 17
    assert not [k for k in original.ms if k.startswith("customops::")]
    assert original.total_ms > 0 and converted.total_ms > 0


def test_cli_lists_the_largest_differences(capsys):
    pytest.importorskip("torchvision")
    argv = ["--device", "cpu", "--quick", "--steps", "1", "--top", "4", "--configs", "float32-channels_last"]
    assert kernels.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("== mobilenet_v2 float32-channels_last")
    assert out[start + 1].startswith("  kernels per step: original ")
    rows = out[start + 3:start + 7]
    assert len(rows) == 4
    diffs = [abs(float(row.split()[0])) for row in rows]
    assert diffs == sorted(diffs, reverse=True), rows
