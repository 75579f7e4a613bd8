"""Timers (CUDA events on GPU, wall clock on CPU) and the copy-bandwidth probe."""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from typing import Callable, Iterator

import torch


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while timing, as timeit has it: a collection takes milliseconds over a
    model's objects and lands in whichever call it falls in, which a call-by-call comparison would read as that
    call's cost. No collection on entry: one takes a fifth of a second with timm's models loaded, and the host
    benchmark enters this once per layer and pass. Nested, the outer one turns the collector back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def median_ms(fn: Callable[[], object], device: torch.device, warmup: int = 5, repeats: int = 50) -> float:
    """Median time of one call of fn, in milliseconds, after warm-up calls."""
    for _ in range(warmup):
        fn()
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def back_to_back_ms(fn: Callable[[], object], device: torch.device, warmup: int = 5, calls: int = 50) -> float:
    """GPU time of one call of fn when calls are queued back to back, as in a training step, in milliseconds.

    A sleep kernel holds the stream while the host queues every call, so the launches' host time overlaps
    the GPU's work: what remains is the kernels' time plus the gaps between them. median_ms instead times
    each call alone, host launch latency included, which favours the library with fewer launches."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(100_000_000)  # about 50 ms: longer than queueing the calls takes
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


class GpuSleep:
    """Queues a GPU sleep of about `ms` milliseconds (torch.cuda._sleep counts clock cycles: measured once), so that
    the host's work issued behind it is timed alone: the host never waits for the GPU while the sleep lasts."""

    def __init__(self, device: torch.device) -> None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        start.record()
        torch.cuda._sleep(20_000_000)
        end.record()
        end.synchronize()
        self.cycles_per_ms = 20_000_000 / start.elapsed_time(end)

    def __call__(self, ms: float) -> torch.cuda.Event:
        """Queues the sleep; the returned event completes when it ends (query() True: the GPU caught up)."""
        torch.cuda._sleep(int(ms * self.cycles_per_ms))
        event = torch.cuda.Event()
        event.record()
        return event


@contextlib.contextmanager
def env_set(name: str, value: str):
    """Sets the environment variable for the block (an algorithm forced), then removes it."""
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name)


def queued_pass_ms(ours: Callable[[], object], cudnn: Callable[[], object], device: torch.device,
                   forced: Callable[[], contextlib.AbstractContextManager]) -> tuple[float, float, float]:
    """One pass, queued back to back (30 calls): cuDNN's time, ours as it runs, and ours inside `forced()` (an
    algorithm or a backend forced), in milliseconds."""
    c, o = back_to_back_ms(cudnn, device, calls=30), back_to_back_ms(ours, device, calls=30)
    with forced():
        return c, o, back_to_back_ms(ours, device, calls=30)


def copy_bandwidth(device: torch.device, nbytes: int, repeats: int = 50) -> float:
    """Device copy bandwidth in bytes/s, counting bytes read plus bytes written."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, repeats=repeats)
    return 2 * src.numel() * src.element_size() / (ms * 1e-3)


@contextlib.contextmanager
def tf32(cudnn: bool, matmul: bool):
    """Sets whether cuDNN convolutions and matmuls (so our GEMMs and implicit-GEMM forward) may use TF32 for
    float32, and restores both flags after: cuDNN defaults to TF32, matmuls to full float32."""
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = cudnn, matmul
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old
