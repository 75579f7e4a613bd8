"""Concurrent calls: each operator and its backward op called from several
Python threads at once (the ops release the GIL while they run), and on CUDA
from several streams at once, must give what the same calls give one after
another. On the CPU the kernels promise results that do not depend on the
thread count, so the comparison is bit for bit; on CUDA too, except for the
ops whose OpInfo says otherwise (cuda_concurrent_bitwise: where cuBLAS computes,
as in conv2d's explicit path, whose reductions may differ between streams).

What this guards: state shared between calls (static caches, plans,
workspaces, events) that a second caller would overwrite while the first still
uses it.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from conftest import requires_cuda
from op_db import OP_DB, OpInfo

pytestmark = pytest.mark.torch_independent

THREADS = 4
ROUNDS = 3  # each thread runs every call this many times, in its own shuffled order


def _calls(op: OpInfo, device, dtype=torch.float32):
    """(name, fn) pairs: the op on each of its samples, and its backward op on a fixed gradient of each."""
    calls = []
    g = torch.Generator().manual_seed(0)
    for sample in op.sample_inputs(device, dtype, False):
        fn = op.op
        calls.append((f"{sample.name}", lambda s=sample, f=fn: f(*s.args, **s.kwargs)))
        out = op.op(*sample.args, **sample.kwargs)
        grad = torch.randn(out.shape, generator=g, dtype=torch.float64).to(out)
        backward, args, kwargs = op.backward_call(sample, grad)
        calls.append((f"{sample.name} backward", lambda f=backward, a=args, k=kwargs: f(*a, **k)))
    return calls


def _as_list(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _same(got, want, exact: bool, what: str):
    for i, (g, w) in enumerate(zip(_as_list(got), _as_list(want))):
        if w is None:
            assert g is None, f"{what}[{i}]"
            continue
        if exact:
            assert torch.equal(g, w), f"{what}[{i}]: differs from the serial result"
        else:
            torch.testing.assert_close(g, w, msg=lambda m: f"{what}[{i}]: {m}")


def _run_threads(calls, worker):
    """worker(thread_index, order) in THREADS threads released together; the exceptions they raised."""
    start = threading.Barrier(THREADS)
    orders = []
    for t in range(THREADS):
        order = [i for _ in range(ROUNDS) for i in range(len(calls))]
        random.Random(t).shuffle(order)
        orders.append(order)

    def run(t):
        start.wait()
        return worker(t, orders[t])

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(run, range(THREADS)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_threads_give_the_serial_results(op, dtype):
    calls = _calls(op, "cpu", dtype)
    serial = [fn() for _, fn in calls]

    def worker(t, order):
        return [(i, calls[i][1]()) for i in order]

    for results in _run_threads(calls, worker):
        for i, got in results:
            _same(got, serial[i], True, f"{op}: {calls[i][0]}")


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_threads_run_autograd_concurrently(op):
    """Forward and backward through autograd (the registered backward ops, their saved state) in every thread."""
    samples = [s for s in op.sample_inputs("cpu", torch.float64, True) if any(t.requires_grad for t in s.tensors())]

    def step(sample):
        inputs = [t for t in sample.tensors() if t.requires_grad]
        out = op.op(*sample.args, **sample.kwargs)
        grad = torch.ones_like(out)
        return [out.detach()] + [g for g in torch.autograd.grad(out, inputs, grad, allow_unused=True)]

    calls = [(s.name, lambda s=s: step(s)) for s in samples]
    serial = [fn() for _, fn in calls]

    def worker(t, order):
        return [(i, calls[i][1]()) for i in order]

    for results in _run_threads(calls, worker):
        for i, got in results:
            _same(got, serial[i], True, f"{op} autograd: {calls[i][0]}")


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_cuda_streams_give_the_serial_results(op, dtype):
    """Every call in each of several streams at once, from as many host threads (each stream's work queued by its
    own thread, as data loaders and pipelines do), against the calls on the default stream one by one."""
    calls = _calls(op, "cuda", dtype)
    serial = [fn() for _, fn in calls]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in range(THREADS)]

    def worker(t, order):
        stream = streams[t]
        stream.wait_stream(torch.cuda.current_stream())  # the inputs were made on the default stream
        with torch.cuda.stream(stream):
            results = [(i, calls[i][1]()) for i in order]
        stream.synchronize()
        return results

    all_results = _run_threads(calls, worker)
    torch.cuda.synchronize()
    for results in all_results:
        for i, got in results:
            _same(got, serial[i], op.cuda_concurrent_bitwise, f"{op} on a side stream: {calls[i][0]}")


@requires_cuda
@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_cuda_streams_from_one_thread(op):
    """The calls queued round-robin on several streams from one thread, so that their kernels overlap on the
    device; each stream's results read only after the default stream has waited for it."""
    calls = _calls(op, "cuda", torch.float32)
    serial = [fn() for _, fn in calls]
    streams = [torch.cuda.Stream() for _ in range(THREADS)]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    results = []
    for i, (_, fn) in enumerate(calls * ROUNDS):
        with torch.cuda.stream(streams[i % len(streams)]):
            results.append((i % len(calls), fn()))
    for s in streams:
        torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for i, got in results:
        _same(got, serial[i], op.cuda_concurrent_bitwise, f"{op} round-robin: {calls[i][0]}")
