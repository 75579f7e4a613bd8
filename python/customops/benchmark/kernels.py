"""python -m customops.benchmark.kernels: where a converted model's step time goes, kernel by kernel.

    python -m customops.benchmark.kernels [--device cuda|cpu] [--models mobilenet_v2,...]
        [--configs bf16-channels_last,...] [--steps N] [--top N] [--quick] [--compile]

For each model and configuration of `python -m customops.benchmark.models`, profiles a few training steps of the
original and of its customops.convert'ed copy (torch.profiler) and adds up, per step, the time of each kernel by
name: on CUDA the GPU time of every kernel, memset and copy; on CPU each operator's self time. It prints both
totals and the kernels whose time differs most, converted minus original. A model benchmark that shows the
converted step slower says by how much; this says in which kernels (the layer table, benchmark.layers, times each
layer's passes alone, outside the model).
"""

from __future__ import annotations

import argparse
import collections
from dataclasses import dataclass

import torch
from torch.autograd import DeviceType

from . import models


@dataclass
class KernelTimes:
    ms: dict[str, float]  # kernel name -> ms per step
    calls: dict[str, float]  # kernel name -> calls (launches) per step

    @property
    def total_ms(self) -> float:
        return sum(self.ms.values())

    @property
    def total_calls(self) -> float:
        return sum(self.calls.values())


def kernel_times(step, device: torch.device, steps: int, warmup: int = 2) -> KernelTimes:
    """Time per step of each kernel (CUDA) or operator's own work (CPU) that `step` runs, by name."""
    for _ in range(warmup):
        step()
    cuda = device.type == "cuda"
    activity = torch.profiler.ProfilerActivity.CUDA if cuda else torch.profiler.ProfilerActivity.CPU
    if cuda:
        torch.cuda.synchronize(device)
    with torch.profiler.profile(activities=[activity]) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize(device)
    ms: dict[str, float] = collections.defaultdict(float)
    calls: dict[str, float] = collections.defaultdict(float)
    for event in prof.events():
        if cuda and event.device_type == DeviceType.CUDA:
            ms[event.name] += event.time_range.elapsed_us() / 1e3 / steps
        elif not cuda and event.device_type == DeviceType.CPU:
            ms[event.name] += event.self_cpu_time_total / 1e3 / steps
        else:
            continue
        calls[event.name] += 1 / steps
    return KernelTimes(dict(ms), dict(calls))


def compare(name: str, config_name: str, device: torch.device, steps: int, quick: bool,
            compiled: bool = False) -> tuple[KernelTimes, ...]:
    """The training step's kernel times of `name` and of its converted copy, in one configuration; with
    `compiled`, of both torch.compile'd (compiled cold, as the model benchmark does)."""
    spec, config = models.MODELS[name], models.CONFIGS[config_name]
    shape = models.input_shape(spec, device, quick)
    torch.manual_seed(0)
    original, converted, _, x = models.model_pair(models.build_pristine(spec, shape), config, shape, device, spec)
    pair = (original, converted)
    if not compiled:
        return tuple(kernel_times(models.train_step(m, x, config), device, steps) for m in pair)
    torch._dynamo.reset()
    with torch._inductor.config.patch(force_disable_caches=True):
        return tuple(kernel_times(models.train_step(torch.compile(m), x, config), device, steps) for m in pair)


def report(original: KernelTimes, converted: KernelTimes, top: int, width: int) -> list[str]:
    lines = [f"  kernels per step: original {original.total_ms:.3f} ms ({original.total_calls:.0f} calls), "
             f"converted {converted.total_ms:.3f} ms ({converted.total_calls:.0f} calls), "
             f"difference {converted.total_ms - original.total_ms:+.3f} ms",
             f"  {'conv - orig':>11}  {'orig ms (calls)':>17}  {'conv ms (calls)':>17}  kernel"]
    names = sorted(set(original.ms) | set(converted.ms),
                   key=lambda k: -abs(converted.ms.get(k, 0.0) - original.ms.get(k, 0.0)))
    for k in names[:top]:
        a, b = original.ms.get(k, 0.0), converted.ms.get(k, 0.0)
        lines.append(f"  {b - a:+11.3f}  {a:9.3f} ({original.calls.get(k, 0):5.0f})  "
                     f"{b:9.3f} ({converted.calls.get(k, 0):5.0f})  {k[:width]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.benchmark.kernels", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default="mobilenet_v2", help="comma-separated, of: " + ", ".join(models.MODELS))
    p.add_argument("--configs", default="float32-channels_last,bf16-channels_last",
                   help="comma-separated, of: " + ", ".join(models.CONFIGS))
    p.add_argument("--steps", type=int, default=5, help="profiled training steps (after 2 unprofiled ones)")
    p.add_argument("--top", type=int, default=25, help="kernels listed, largest difference first")
    p.add_argument("--width", type=int, default=150, help="characters of a kernel's name shown")
    p.add_argument("--quick", action="store_true", help="batch 2 at a small resolution (a smoke test)")
    p.add_argument("--compile", action="store_true", help="profile the torch.compile'd training steps")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    names = models._names(args.models, models.MODELS, "model")
    configs = models._names(args.configs, models.CONFIGS, "config")
    print(f"device: {models.device_name(device)}, torch {torch.__version__}; per training step "
          f"({'GPU kernel time' if device.type == 'cuda' else 'operators self time'}), {args.steps} steps profiled")
    for name in names:
        for config_name in configs:
            original, converted = compare(name, config_name, device, args.steps, args.quick, args.compile)
            print(f"== {name} {config_name}{' compiled' if args.compile else ''}")
            print("\n".join(report(original, converted, args.top, args.width)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
