"""python -m customops.benchmark.models: a CPU smoke run of the whole CLI on tiny inputs, and its check failing."""

import pytest
import torch
from torch import nn

import customops
from conftest import requires_cuda
from customops.benchmark import models
from customops.benchmark.replknet import RepLKStage

QUICK = ["--device", "cpu", "--quick", "--repeats", "1", "--warmup", "0", "--no-compile"]


def cells(row: str, *names: str) -> list[str]:
    """The cells of a Markdown table row under the given headers."""
    values = row.split(" | ")
    return [values[models.HEADER.index(name)] for name in names]
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.torch_independent]


def test_replknet_stage_has_large_and_small_depthwise_branches():
    stage = RepLKStage(channels=8, depth=2)
    depthwise = [m.kernel_size for m in stage.modules() if isinstance(m, nn.Conv2d) and m.groups == 8]
    assert sorted(depthwise) == [(5, 5), (5, 5), (31, 31), (31, 31)]
    x = torch.randn(2, 8, 12, 12)
    assert stage(x).shape == x.shape


def test_cli_runs_checks_and_writes_markdown(tmp_path, capsys):
    pytest.importorskip("torchvision")
    md = tmp_path / "models.md"
    argv = QUICK + ["--models", "mobilenet_v2,replknet31", "--configs", "float32-nchw,bf16-channels_last",
                    "--markdown", str(md), "--plot", str(tmp_path / "models.png")]
    assert models.main(argv) == 0
    out = capsys.readouterr().out
    # mobilenet_v2 has 17 inverted residual blocks, each with one depthwise 3x3; the stage 2 x (31x31 + 5x5).
    assert "mobilenet_v2: customops.convert swapped 17 Conv2d -> DepthwiseConv2d" in out
    assert "replknet31: customops.convert swapped 4 Conv2d -> DepthwiseConv2d" in out
    text = md.read_text()
    assert "Command: `python -m customops.benchmark.models " + " ".join(argv) + "`" in text
    assert f"torch {torch.__version__}" in text
    rows = [line for line in text.splitlines() if line.startswith("| mobilenet_v2") or line.startswith("| replknet")]
    assert len(rows) == 4
    for row in rows:
        assert "| ok (" in row, row
        ratios = [float(cell) for cell in cells(row, "train conv/orig", "infer conv/orig")]
        assert all(r > 0 for r in ratios), row
    assert (tmp_path / "models.png").stat().st_size > 0


def test_cpu_rows_leave_the_graphed_columns_empty(tmp_path):
    md = tmp_path / "models.md"
    assert models.main(QUICK + ["--models", "replknet31", "--configs", "float32-nchw", "--markdown", str(md)]) == 0
    row = next(line for line in md.read_text().splitlines() if line.startswith("| replknet31"))
    assert cells(row, "graphed train orig ms", "graphed train conv ms", "graphed conv/orig") == ["—"] * 3, row
    assert cells(row, "compiled train orig ms", "compiled conv/orig", "compile s orig / conv") == ["—"] * 3, row


def test_compiled_steps_of_the_blocks_are_checked_and_timed(tmp_path, capsys):
    """torch.compile'd original and converted models: checked against float64 like the eager ones (the row
    fails otherwise), timed, and their compile times reported."""
    md = tmp_path / "models.md"
    argv = ["--device", "cpu", "--quick", "--repeats", "1", "--warmup", "0", "--models", "clip_mlp,decoder",
            "--configs", "float32,float32-channels_last", "--markdown", str(md)]
    assert models.main(argv) == 0
    rows = [line for line in md.read_text().splitlines() if line.startswith(("| clip_mlp", "| decoder"))]
    assert len(rows) == 2
    for row in rows:
        assert "; compiled ok (" in row, row
        original, converted, ratio = (float(c) for c in cells(row, "compiled train orig ms", "compiled train conv ms",
                                                             "compiled conv/orig"))
        assert original > 0 and converted > 0 and ratio == pytest.approx(converted / original, rel=0.05, abs=0.01)
        assert all(float(t) > 0 for t in cells(row, "compile s orig / conv")[0].split(" / ")), row
    out = capsys.readouterr().out
    assert "clip_mlp: customops.convert swapped 1 QuickGELURef -> QuickGELU" in out


@requires_cuda
def test_cuda_rows_time_the_graphed_training_step(tmp_path):
    """On CUDA the training step is captured as a CUDA graph (autocast too) and its replays timed."""
    md = tmp_path / "models.md"
    argv = ["--device", "cuda", "--quick", "--repeats", "2", "--warmup", "1", "--models", "replknet31",
            "--configs", "float32-channels_last,bf16-nchw", "--no-compile", "--markdown", str(md)]
    assert models.main(argv) == 0
    rows = [line for line in md.read_text().splitlines() if line.startswith("| replknet31")]
    assert len(rows) == 2
    for row in rows:
        original, converted, ratio = (float(c) for c in cells(row, "graphed train orig ms", "graphed train conv ms",
                                                             "graphed conv/orig"))
        assert original > 0 and converted > 0, row
        assert ratio == pytest.approx(converted / original, rel=0.05, abs=0.01), row


def test_a_wrong_conversion_fails_the_check_and_the_exit_code(tmp_path, monkeypatch):
    convert = customops.convert

    def convert_then_perturb(model, return_report=False, **kwargs):
        converted, report = convert(model, **kwargs, return_report=True)
        weight = converted.get_submodule(report.swapped[0][0]).weight
        with torch.no_grad():
            weight.add_(torch.randn_like(weight) * weight.std() * 0.01)  # noise: a scale would vanish in the BNs
        return (converted, report) if return_report else converted

    monkeypatch.setattr(customops, "convert", convert_then_perturb)
    md = tmp_path / "models.md"
    assert models.main(QUICK + ["--models", "replknet31", "--configs", "float32-nchw", "--markdown", str(md)]) == 1
    row = next(line for line in md.read_text().splitlines() if line.startswith("| replknet31"))
    assert "| FAIL eval output: " in row


def test_layers_cli_finds_every_depthwise_layer(tmp_path, capsys):
    """python -m customops.benchmark.layers: mobilenet_v2's 17 depthwise layers, counted by shape, each timed
    against PyTorch; the Markdown holds one total row a configuration."""
    pytest.importorskip("torchvision")
    from customops.benchmark import layers

    found = layers.depthwise_layers(models.MODELS["mobilenet_v2"].build(3), (1, 3, 64, 64))
    assert sum(found.values()) == 17
    assert {layer.stride for layer in found} == {(1, 1), (2, 2)}
    md = tmp_path / "layers.md"
    argv = ["--device", "cpu", "--quick", "--models", "mobilenet_v2", "--configs", "float32-channels_last",
            "--markdown", str(md)]
    assert layers.main(argv) == 0
    table = md.read_text()
    assert table.count("| all depthwise layers |") == 1
    assert table.count("| mobilenet_v2 | float32-channels_last |") == len(found) + 1
