import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import customops  # noqa: E402,F401  (loads the library once, for every test)

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")


def cuda_kernel_names(fn) -> list[str]:
    """The names of the CUDA kernels fn launches (the profiler's), for tests of which path a call takes."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def tf32():
    """torch.backends.cuda.matmul.allow_tf32 on for the test (the flag conv2d's TF32 kernels follow)."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


@pytest.fixture
def one_thread():
    """For smoke runs of the benchmarks, not measurements: on a busy machine OpenMP threads waiting for each
    other take ten times the work's own time."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
