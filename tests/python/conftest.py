import contextlib
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

import customops  # noqa: E402,F401  (loads the library once, for every test)

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")

# The heavy checks (the model zoo's, the fuzzer's, the deployment examples' networks) take compact samples unless
# CUSTOMOPS_FULL_TESTS=1 (`scripts/test.sh --full`): each sample still reaches every op and every runtime.
FULL_TESTS = os.environ.get("CUSTOMOPS_FULL_TESTS", "") not in ("", "0")


def full_or_sample(full, sample):
    """`full` under CUSTOMOPS_FULL_TESTS=1, else the compact `sample`."""
    return full if FULL_TESTS else sample


def cuda_kernel_names(fn) -> list[str]:
    """The names of the CUDA kernels fn launches (the profiler's), for tests of which path a call takes."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def _pair(v):
    return list(v) if isinstance(v, tuple) else [v, v]


def weight_grad(g, x, w, stride, padding, dilation, groups=1):
    """customops.conv2d's weight gradient alone (conv2d_backward asked for it only); stride, padding and dilation
    ints or pairs."""
    return torch.ops.customops.conv2d_backward(g, x, w, _pair(stride), _pair(padding), _pair(dilation), groups,
                                               [False, True, False])[1]


def check_weight_grad(case, dtype, layout, kernel, atol):
    """The CUDA weight gradient of a (N, C, H, W, K, (kh, kw), stride, padding, dilation, name) case, random inputs
    in `dtype` and `layout`, against float64 aten.convolution_backward: `kernel` among the kernels it ran, the
    weight's dtype, shape and memory format, values within atol of the largest."""
    n, c, h, w_, k, ks, stride, padding, dilation, _ = case
    x = torch.randn(n, c, h, w_, device="cuda", dtype=dtype).to(memory_format=layout)
    w = torch.randn(k, c, *ks, device="cuda", dtype=dtype).to(memory_format=layout)
    out = torch.nn.functional.conv2d(x.float(), w.float(), None, stride, padding, dilation)
    g = torch.randn(out.shape, device="cuda", dtype=dtype).to(memory_format=layout)
    want = torch.ops.aten.convolution_backward(g.double(), x.double(), w.double(), None, _pair(stride), _pair(padding),
                                               _pair(dilation), False, [0, 0], 1, [False, True, False])[1]
    got = weight_grad(g, x, w, stride, padding, dilation)
    assert any(kernel in name for name in cuda_kernel_names(lambda: weight_grad(g, x, w, stride, padding, dilation)))
    assert got.dtype == dtype and got.shape == want.shape
    assert got.is_contiguous(memory_format=layout)
    scale = want.abs().max()
    torch.testing.assert_close(got.double() / scale, want / scale, rtol=0, atol=atol)


def weight_grad_kernel_names(dtype, c=16, k=16, hw=10, ks=3, groups=1, layout=torch.channels_last, stride=1):
    """The CUDA kernels of a weight gradient: batch 2 of hw x hw images, a ks x ks filter padded by ks // 2."""
    x = torch.randn(2, c, hw, hw, device="cuda", dtype=dtype).to(memory_format=layout)
    w = torch.randn(k, c // groups, ks, ks, device="cuda", dtype=dtype)
    out = (hw + 2 * (ks // 2) - ks) // stride + 1
    g = torch.randn(2, k, out, out, device="cuda", dtype=dtype).to(memory_format=layout)
    return cuda_kernel_names(lambda: weight_grad(g, x, w, stride, ks // 2, 1, groups))


def pytest_addoption(parser):
    parser.addoption("--op", action="append", default=[], metavar="NAME",
                     help="only the tests that cover operator NAME (repeatable): those parametrized by it (or its "
                     "pointwise family) and those that check every op at once (marked every_op)")


def _covers(value, ops) -> bool:
    """Whether a test's parameter is one of `ops`: an OpInfo, an op's name, a family module, or a tuple holding one."""
    if isinstance(value, (tuple, list)):
        return any(_covers(v, ops) for v in value)
    if isinstance(value, str):
        return value.removesuffix("_backward") in ops
    name = getattr(value, "name", None) if not isinstance(value, type(os)) else value.__name__.rpartition(".")[2]
    return isinstance(name, str) and name in ops


def pytest_collection_modifyitems(config, items):
    ops = set(config.getoption("--op"))
    if not ops:
        return
    unknown = ops - set(customops._library.registered_ops())
    if unknown:
        raise pytest.UsageError(f"--op: no registered operator {', '.join(sorted(unknown))} (built the library?)")
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        covered = item.get_closest_marker("every_op") or any(_covers(v, ops) for v in params.values())
        (keep if covered else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def customops_kernels():
    """customops' own CUDA kernels for the test, also where customops.backends' rule would run PyTorch's: for
    the tests of those kernels."""
    with contextlib.ExitStack() as stack:
        for op in customops.backends.ops():
            stack.enter_context(customops.backends.use(op, "customops"))
        yield


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


def skipped_paths(reports) -> list[str]:
    """One line per test file and skip reason among `reports` (pytest's skipped reports), with how many tests it
    skipped: what an op's run (--op) did not check, and why."""
    counts = {}
    for report in reports:
        where = report.nodeid.split("::")[0].rpartition("/")[2]
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        counts[where, reason] = counts.get((where, reason), 0) + 1
    return [f"{where}: {n} skipped: {reason}" for (where, reason), n in sorted(counts.items())]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # An op's run (the guide's "done" command) says which paths it left unchecked, and why, rather than leaving a
    # skipped TF-Lite or CUDA path to look like a pass; the skips are counted in the last line, named here.
    ops = config.getoption("--op")
    lines = skipped_paths(terminalreporter.stats.get("skipped", [])) if ops else []
    if lines:
        terminalreporter.section(f"paths not checked for {', '.join(ops)}")
        for line in lines:
            terminalreporter.write_line(line)
