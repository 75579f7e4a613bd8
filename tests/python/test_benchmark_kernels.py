"""python -m customops.benchmark.kernels: the per-kernel comparison of a model's training step, on the CPU; and
customops.benchmark.depthwise_passes' byte counts and summary, which need no GPU."""

import pytest
import torch

from customops.benchmark import kernels

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.torch_independent]


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


def test_depthwise_pass_bytes_count_each_tensor_once():
    from customops.benchmark.depthwise_passes import Case, case_bytes, pass_bytes

    # N=2, C=3, 8x8, 3x3 stride 2, padding 1: x 2*3*8*8 = 384, y 2*3*4*4 = 96, weight 3*3*3 = 27 elements, 2 bytes each.
    for name in ("fwd", "dgrad", "wgrad"):
        assert pass_bytes(name, 2, 3, 8, 8, 3, 2, 2) == (384 + 96 + 27) * 2
    assert pass_bytes("wgrad", 2, 3, 8, 8, 3, 2, 2, padding=0) == (384 + 2 * 3 * 3 * 3 + 27) * 2  # y 3x3
    assert pass_bytes("fwd", 1, 4, 6, 6, (1, 5), 1, 4) == (144 + 144 + 20) * 4  # (0, 2) padding keeps 6x6
    assert case_bytes("dgrad", Case("c", 2, 3, 8, 8, (3, 3), (2, 2), (1, 1)), 2) == 1014


def test_depthwise_passes_rows_and_geomean_show_the_roof_shares():
    from customops.benchmark.depthwise_passes import Case, geomean_text, roofs, row_text

    case = Case("c", 2, 3, 8, 8, (3, 3), (2, 2), (1, 1))  # 1014 bytes a pass in float16
    times = {p: (2e-3, 1e-3, 4e-3) for p in ("fwd", "dgrad", "wgrad")}  # cuDNN, ours, our kernels ms
    shares = roofs(case, 2, times, bandwidth=1014 / 1e-6 / 0.8)  # ours at 80% of the copy, kernels 20, cuDNN 40
    assert shares["wgrad"] == pytest.approx((0.8, 0.2, 0.4))
    assert row_text("x", times, shares).count("(0.50) kernels 0.0040 (2.00) roof 80%/20%/40%") == 3
    faster = {p: (2e-3, 0.5e-3, 2e-3) for p in times}  # ours / cuDNN 0.25: the geomean with 0.5 is sqrt(0.125)
    text = geomean_text("g", [(times, shares), (faster, roofs(case, 2, faster, 1014 / 1e-6 / 0.8))])
    assert text.startswith("g | fwd+dgrad+wgrad ours/cudnn 0.35 kernels/cudnn 1.41 | fwd roof 113%/28%/40%"), text
    assert text.endswith("| choice/best 0.35, >8% off in 0 of 6"), text
    # As it runs, customops is 3 times slower than its own kernels on each pass: its choice was wrong.
    wrong = {p: (2e-3, 3e-3, 1e-3) for p in times}
    assert geomean_text("g", [(wrong, shares)]).endswith("| choice/best 3.00, >8% off in 3 of 3")
