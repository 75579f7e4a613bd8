"""The model zoo benchmark's check on CPU, small inputs: every zoo model converts and its outputs and
gradients match the original's (customops.benchmark.zoo --check-only)."""

from __future__ import annotations

import os
import re
import time

import pytest
import torch

pytest.importorskip("timm")

from conftest import full_or_sample  # noqa: E402
from customops.benchmark import zoo  # noqa: E402

pytestmark = pytest.mark.torch_independent


# Three models of the zoo that between them hold each kind of layer it converts: an inverted-residual net's 3x3 and
# 5x5 depthwise convolutions, strided ones among them, a ConvNeXt's 7x7 ones, and the segmentation model's resizes.
SAMPLE = ("efficientnet_b0", "convnextv2_atto", zoo.SEGMENTATION)


def _checked_models() -> tuple:
    """The sample, or the whole zoo under CUSTOMOPS_FULL_TESTS=1; CUSTOMOPS_ZOO_CHECK_MODELS names others."""
    names = os.environ.get("CUSTOMOPS_ZOO_CHECK_MODELS")
    return tuple(names.split(",")) if names else full_or_sample(zoo.ZOO, SAMPLE)


def test_every_zoo_model_converts_and_matches_the_original(capsys):
    models = _checked_models()
    assert zoo.main(["--device", "cpu", "--check-only", "--configs", "float32-nchw", "--models", ",".join(models)]) == 0
    out = capsys.readouterr().out
    for name in models:
        assert name in out
    if zoo.SEGMENTATION in models:
        assert "Upsample -> UpsampleBilinear2d" in out  # the segmentation-style model's resizes are converted


def test_depthwise_layers_are_found_in_forward_order():
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, 2, 1, groups=8), torch.nn.Conv2d(8, 16, 1),
                                torch.nn.Conv2d(16, 16, (1, 7), 1, (0, 3), groups=16, bias=False))
    layers = zoo.depthwise_layers(model, torch.randn(1, 8, 10, 10))
    assert layers == [(8, 10, 10, (3, 3), (2, 2), (1, 1), (1, 1), True),
                      (16, 5, 5, (1, 7), (1, 1), (0, 3), (1, 1), False)]


def test_any_timm_model_by_name_and_unknown_names_refused():
    assert zoo.model_names("efficientnet_b0,mnasnet_100") == ["efficientnet_b0", "mnasnet_100"]
    with pytest.raises(SystemExit, match="unknown model: not_a_model"):
        zoo.model_names("efficientnet_b0,not_a_model")


def test_cudnn_benchmark_flag_turns_benchmark_mode_on_before_any_model_runs(monkeypatch, capsys):
    seen = []

    def run(name, config, device, batch, *args, **kwargs):
        seen.append(torch.backends.cudnn.benchmark)
        return zoo.ZooRow(name, config, batch, check="ok", ok=True)

    monkeypatch.setattr(zoo, "run", run)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    argv = ["--device", "cpu", "--check-only", "--models", "lcnet_100", "--configs", "float32-nchw"]
    assert zoo.main(argv) == 0 and zoo.main([*argv, "--cudnn-benchmark"]) == 0
    assert seen == [False, True]
    out = capsys.readouterr().out
    assert "cudnn.benchmark False" in out and "cudnn.benchmark True" in out


def test_host_benchmark_runs_on_cpu(tmp_path, capsys):
    from customops.benchmark import host

    out = tmp_path / "host.md"
    assert host.main(["--device", "cpu", "--calls", "2", "--rounds", "1", "--markdown", str(out)]) == 0
    table = out.read_text()
    assert "op alone us" in table
    assert len([line for line in table.splitlines() if line.startswith("| ") and "us |" not in line]) == 8


class StandInSleep:
    """host's GPU sleep on the CPU: each call a window; its event says the GPU caught up in the windows numbered
    (from 1) in caught_up."""

    def __init__(self, device=None, caught_up=()):
        self.calls, self.caught_up = 0, caught_up

    def __call__(self, ms):
        self.calls += 1
        caught_up = self.calls in self.caught_up
        return type("Event", (), {"query": lambda self: caught_up})()


def test_host_window_differences_cancel_a_drifting_host():
    from customops.benchmark import host

    # auto takes 5 us more than nn.Conv2d in every window while the host slows by 100 us a window: the windows'
    # differences say 5; then differences of 1..5 us: their median and quartiles.
    w = host.Windows()
    w.kept = [{"nn.Conv2d": [100.0 * i, 100.0 * i + 1], "auto": [100.0 * i + 5, 100.0 * i + 6]} for i in range(7)]
    assert w.difference("auto", "nn.Conv2d") == (5.0, 5.0, 5.0)
    assert w.median("nn.Conv2d") == 300.5
    w.kept = [{"nn.Conv2d": [10.0], "auto": [10.0 + d]} for d in (3, 1, 5, 2, 4)]
    assert w.difference("auto", "nn.Conv2d") == (3.0, 2.0, 4.0)
    # One window of three where auto's call met a stall: the pooled medians differ by 51 us, the windows by 1.
    w.kept = [{"nn.Conv2d": [0.0], "auto": [150.0]}, {"nn.Conv2d": [100.0], "auto": [101.0]},
              {"nn.Conv2d": [50.0], "auto": [51.0]}]
    assert w.median("auto") - w.median("nn.Conv2d") == 51.0 and w.difference("auto", "nn.Conv2d")[0] == 1.0
    w.kept = []
    assert all(v != v for v in w.difference("auto", "nn.Conv2d"))


def test_host_interleaved_windows_time_each_variant_and_drop_caught_up_windows():
    from customops.benchmark import host

    # On the CPU, a stand-in for the GPU sleep: its event says the GPU caught up in the second window, which the
    # result counts and leaves out. The slow variant waits 2 ms more per forward + backward than the fast one.
    x, g = torch.randn(8, requires_grad=True), torch.ones(8)
    setups = []

    def slow():
        end = time.perf_counter() + 2e-3
        while time.perf_counter() < end:
            pass
        return x * 2

    variants = {"fast": (lambda: setups.append("fast"), lambda: x * 2), "slow": (lambda: setups.append("slow"), slow)}
    timed = host.interleaved_us(variants, g, StandInSleep(caught_up=(2,)), windows=4, per=3, backward=True,
                                sync=lambda: None)
    assert timed.caught_up == 1 and len(timed.kept) == 3
    assert all(len(window[n]) == 3 for window in timed.kept for n in ("fast", "slow"))
    diff, low, high = timed.difference("slow", "fast")
    assert 1500 < low <= diff <= high and diff < 20000, (diff, low, high)
    assert setups.count("fast") == setups.count("slow") == 1 + 1 + 4 * 3  # warm-up, sizing window, windows' calls
    assert x.grad is not None


def test_host_model_table_on_cpu_with_the_gpu_sleep_stood_in(tmp_path, monkeypatch):
    from customops.benchmark import host

    # --model's whole path on the CPU: the device, the sleep and the synchronisation stood in, a small model's
    # layers at batch 1. Every layer shape gets a forward and a forward + backward row with its window differences.
    layer_steps = host.layer_steps
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(host, "GpuSleep", StandInSleep)
    monkeypatch.setattr(host, "device_name", lambda device: "a stand-in device")
    monkeypatch.setattr(host, "layer_steps", lambda shape, batch, device: layer_steps(shape, 1, torch.device("cpu")))
    out = tmp_path / "host_models.md"
    argv = ["--model", "lcnet_100", "--batch", "1", "--size", "32", "--windows", "2", "--per", "1", "--markdown",
            str(out)]
    assert host.main(argv) == 0
    table = out.read_text()
    assert "Measured on a stand-in device" in table and "lcnet_100" in table
    rows = [[c.strip() for c in line.strip(" |").split(" | ")] for line in table.splitlines()
            if line.startswith("| ") and "us" not in line]
    layers = host.model_layers("lcnet_100", 32)
    *per_layer, total_forward, total_both = rows
    assert len(per_layer) == 2 * (1 + len(layers)) and [r[4] for r in rows[:2]] == ["forward", "forward + backward"]
    assert all(re.fullmatch(r"[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]", r[-1]) for r in per_layer), rows[0]
    # The model's totals: each column's per-layer figure times how often the model runs the layer (one 5 times).
    for total, pass_name in ((total_forward, "forward"), (total_both, "forward + backward")):
        assert total[:5] == ["lcnet_100", "all its depthwise layers", str(sum(layers.values())), "", pass_name]
        mine = [r for r in per_layer if r[0] == "lcnet_100" and r[4] == pass_name]
        for column in range(5, 10):
            want = sum(int(r[2]) * float(r[column].split(" [")[0]) for r in mine)
            rounding = 0.05 * (sum(layers.values()) + 1)  # each figure printed to 0.1
            assert float(total[column]) == pytest.approx(want, abs=rounding), (column, total)


def test_summary_geomeans_only_the_columns_that_were_timed():
    rows = [zoo.ZooRow("a", "bf16-channels_last", 2, eager=zoo.Spread(0.5), graphed=zoo.Spread(1.0)),
            zoo.ZooRow("b", "bf16-channels_last", 2, eager=zoo.Spread(2.0), graphed=zoo.Spread(4.0))]
    (row,) = zoo.summary(rows)
    # eager, graphed, compiled and reduce-overhead (not timed)
    assert row[4:8] == ("1.000", "2.000", "—", "—")


def test_depthwise_passes_zoo_cases_are_the_distinct_depthwise_shapes():
    from customops.benchmark.depthwise_passes import zoo_cases

    cases = zoo_cases(["mobilenetv3_large_100", "mixnet_s"], batch=4, size=64)
    shapes = [(c.C, c.H, c.W, c.kernel, c.stride, c.padding, c.dilation) for c in cases]
    assert cases and len(set(shapes)) == len(shapes)
    assert len({c.name for c in cases}) == len(cases)
    assert {c.kernel[0] for c in cases} == {3, 5, 7, 9, 11}  # mixnet_s mixes 3x3 to 11x11 kernels
    assert {c.stride for c in cases} == {(1, 1), (2, 2)}
    for c in cases:
        assert c.N == 4 and c.C > 0 and c.H <= 32 and c.kernel[0] == c.kernel[1] and c.kernel[0] % 2 == 1
        assert c.name.startswith(("mobilenetv3_large_100 ", "mixnet_s "))
        assert f" {c.C}ch{c.H} k{c.kernel[0]} s{c.stride[0]}" in c.name
    first = cases[0]  # the first block's 16 channels at half the input's size, after the stride-2 stem
    assert first.name == "mobilenetv3_large_100 16ch32 k3 s1" and first.padding == (1, 1)


def test_the_markdown_keeps_the_rows_of_a_run_cut_short(monkeypatch, tmp_path):
    def run(name, config, *args, **kwargs):
        if name != "lcnet_100":
            raise KeyboardInterrupt  # a time limit reached during the second model
        return zoo.ZooRow(name, config, 2, check="ok")

    monkeypatch.setattr(zoo, "run", run)
    out = tmp_path / "zoo.md"
    with pytest.raises(KeyboardInterrupt):
        zoo.main(["--device", "cpu", "--models", "lcnet_100,tinynet_a", "--configs", "float32-nchw", "--check-only",
                  "--markdown", str(out)])
    rows = [line.split(" | ")[0] for line in out.read_text().splitlines() if line.startswith("| ")]
    assert rows[1:] == ["| lcnet_100"]  # after the header: the finished model alone


def test_a_table_cut_short_is_plotted_from_its_ratios(monkeypatch, tmp_path):
    pytest.importorskip("matplotlib")
    measured = {"lcnet_100": zoo.Spread(0.931, 0.9, 0.97), "tinynet_a": zoo.Spread(1.042, 1.01, 1.08)}

    def run(name, config, *args, **kwargs):
        if name not in measured:
            raise KeyboardInterrupt  # the time limit, before the plot a finished run would write
        return zoo.ZooRow(name, config, 2, "1 Conv2d -> DepthwiseConv2d", eager=measured[name],
                          reduce_overhead=zoo.Spread(0.5, 0.25, 0.75), check="ok")

    monkeypatch.setattr(zoo, "run", run)
    table, png = tmp_path / "zoo.md", tmp_path / "zoo.png"
    with pytest.raises(KeyboardInterrupt):
        zoo.main(["--device", "cpu", "--models", "lcnet_100,tinynet_a,ghostnet_100", "--configs", "float32-nchw",
                  "--timings", "eager", "--markdown", str(table), "--plot", str(png)])
    assert not png.exists()
    plotted = {}
    monkeypatch.setattr(zoo, "plot", lambda rows, path, title: plotted.update(rows=rows, path=path, title=title))
    assert zoo.main(["--replot", str(table), "--plot", str(png)]) == 0
    rows = plotted["rows"]
    assert [r.model for r in rows] == ["lcnet_100", "tinynet_a"]  # the geomean row is not a model
    for r in rows:  # the cells' precision: the ratio to 3 decimals, its middle half to 2
        want = measured[r.model]
        assert (r.eager.ratio, r.eager.low, r.eager.high) == (want.ratio, round(want.low, 2), round(want.high, 2))
        assert (r.reduce_overhead.ratio, r.reduce_overhead.low, r.reduce_overhead.high) == (0.5, 0.25, 0.75)
        assert r.graphed.ratio != r.graphed.ratio and r.compiled.ratio != r.compiled.ratio  # not timed: "—"
    # a table of an earlier version, without the newer columns, is read by its own header's names
    newer = [zoo.HEADER.index(name) for name in ("compiled kernel ms orig / conv", "host conv/orig fwd; bwd",
                                                 "compiled host conv/orig fwd; bwd")]

    def without_newer_columns(line):
        cells = line.split(" | ")
        return " | ".join(c for i, c in enumerate(cells) if i not in newer)

    old = tmp_path / "old.md"
    old.write_text("\n".join(without_newer_columns(line) for line in table.read_text().splitlines()))
    header = next(line for line in old.read_text().splitlines() if line.startswith("| model"))
    assert "host conv/orig" not in header and header.count(" | ") == len(zoo.HEADER) - 4
    zoo.main(["--replot", str(old), "--plot", str(png)])
    assert [(r.model, r.eager) for r in plotted["rows"]] == [(r.model, r.eager) for r in rows]
    device = zoo.bench.device_name(torch.device("cpu"))
    assert plotted["path"] == str(png)
    assert plotted["title"] == f"{device}, torch {torch.__version__}, timm {zoo._timm().__version__}"
    monkeypatch.undo()
    zoo.main(["--replot", str(table), "--plot", str(png)])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):  # nothing to write the plot to
        zoo.main(["--replot", str(table)])


class _SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        import time

        time.sleep(0.03)
        return g * 2


def test_host_phases_split_the_step_into_forward_and_backward():
    from customops.benchmark.models import CONFIGS

    class Slow(torch.nn.Module):
        def forward(self, x):
            return _SlowBackward.apply(x)

    x = torch.randn(4, 3, requires_grad=True)
    (fast, slow), (forward, backward) = zoo.host_phases([torch.nn.Identity(), Slow()], x,
                                                        CONFIGS["float32-nchw"], torch.device("cpu"), 3)
    assert 0 < fast.forward < 30 and 0 < fast.backward < 30
    assert slow.backward >= 30 > slow.forward  # the backward's 30 ms fall in its own phase
    assert fast.caught_up == slow.caught_up == 0
    assert zoo._phase_pair((fast, slow)).count("+") == 2
    # the last model over the first, window by window: the backward alone is slower
    assert backward.low <= backward.ratio <= backward.high and backward.low > 3
    assert forward.ratio < backward.low
    assert zoo._ratio_pair((forward, backward)).count("(") == 2


def test_timing_pauses_the_garbage_collector_and_restores_it():
    import gc

    from customops.benchmark import host
    from customops.benchmark.models import CONFIGS, interleaved_times
    from customops.benchmark.timing import gc_paused

    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():  # nested: stays off, and the outer one turns it back on
                pass
            assert not gc.isenabled()
            raise RuntimeError
    assert gc.isenabled()

    # Each timing loop: its warm-up calls with the collector on, its timed calls with it off, and on again after.
    seen = []
    x, g = torch.randn(4, requires_grad=True), torch.ones(4)

    def step():
        seen.append(gc.isenabled())
        return x * 2

    interleaved_times([step], torch.device("cpu"), warmup=2, repeats=3)
    assert seen == [True] * 2 + [False] * 3 and gc.isenabled()
    seen.clear()
    host.interleaved_us({"a": (lambda: None, step)}, g, StandInSleep(caught_up=()), windows=2, per=2, backward=True,
                        sync=lambda: None)
    assert seen == [True] * 4 + [False] * 4 and gc.isenabled()  # warm-up (3) and sizing (1), then 2 windows of 2
    seen.clear()

    class Recording(torch.nn.Module):
        def forward(self, t):
            seen.append(gc.isenabled())
            return t * 2

    zoo.host_phases([Recording()], x, CONFIGS["float32-nchw"], torch.device("cpu"), 3)
    assert seen == [True] * 2 + [False] * 3 and gc.isenabled()  # the sleep's sizing (2 steps), then 3 windows
