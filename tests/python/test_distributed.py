"""DTensor sharding rules (customops.sharding), checked in two CPU processes with gloo on loopback:
every op and backward op under each placement its rule says is local (distributed_checks.py), and a training
step of a model of customops layers on a batch-sharded DTensor."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp

import customops

pytestmark = [pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                                 reason="torch.distributed with gloo is not available"),
              pytest.mark.torch_dependent]

WORLD = 2
TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.every_op
def test_rules_are_registered_for_every_op():
    from torch.distributed.tensor import DTensor

    strategies = DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs
    for name in torch.ops.customops:
        packet = getattr(torch.ops.customops, name)
        # Every overload but the out= variants, which DTensor does not route through rules.
        for overload in packet.overloads():
            if overload != "out" and not overload.endswith("_out"):
                assert getattr(packet, overload) in strategies, f"customops::{name}.{overload} has no sharding rule"
    assert customops.sharding.registered


@pytest.mark.every_op
def test_ops_on_dtensors_in_two_processes():
    import distributed_checks

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=distributed_checks.worker, args=(rank, WORLD, port, results)) for rank in range(WORLD)]
    for p in procs:
        p.start()
    try:
        reports = dict(results.get(timeout=TIMEOUT_S) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert set(reports) == set(range(WORLD))
    failures = [f"rank {rank}: {f}" for rank, fs in sorted(reports.items()) for f in fs]
    assert not failures, "\n".join(failures)


def test_data_and_tensor_parallel_rehearsal_on_cpu():
    """scripts/two_gpu_check.py (DDP, FSDP2 and a channel-sharded depthwise block, against one process, each eager
    and under torch.compile) in its gloo mode: the GPU machine runs the same script on two GPUs."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    assert torchrun is not None, "torchrun not found beside the interpreter"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [os.path.join(root, "python"), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([torchrun, "--nproc-per-node", str(WORLD), "--master-addr", "127.0.0.1",
                          "--master-port", str(_free_port()), os.path.join(root, "scripts", "two_gpu_check.py"),
                          "--device", "cpu"], capture_output=True, text=True, timeout=3 * TIMEOUT_S, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.count("two_gpu_check passed") == WORLD, run.stdout
    assert run.stdout.count("+ torch.compile") == 3 * WORLD, run.stdout  # the compiled checks ran
