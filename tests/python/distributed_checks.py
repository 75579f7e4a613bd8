"""Checks of the DTensor sharding rules, run in every rank of a process group (test_distributed.py spawns
two CPU processes with gloo). Not a test module itself: pytest does not collect it.

Each case (an OpInfo's sharding_cases in op_db) gives an op, its full-size arguments, placements for its tensor
arguments and the placements its outputs must come out with. The op runs on DTensors distributed that way; the
result must be exactly where the rule says (so no redistribution happened: CommDebugMode counts no collective)
and, gathered, equal the op on the full tensors.
"""

from __future__ import annotations

import os
import traceback

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode

import customops  # noqa: F401  (the ops and their rules)
from op_db import OP_DB

P = Partial()


def _partial_of(full: torch.Tensor, mesh) -> DTensor:
    """A Partial DTensor whose ranks' local values sum to full (each holds a different random share)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(1234)
    shares = [torch.randn(full.shape, generator=gen, dtype=full.dtype) for _ in range(world - 1)]
    last = full - sum(shares) if shares else full
    local = (shares + [last])[rank].contiguous()
    return DTensor.from_local(local, mesh, [P], run_check=False, shape=full.shape, stride=full.stride())


def _dist(arg, placement, mesh):
    if not isinstance(arg, torch.Tensor) or placement is None:
        return arg
    if placement == P:
        return _partial_of(arg, mesh)
    # A copy: a replicated DTensor can hold the tensor itself, which an op that updates an argument in place
    # would then change under the full-size call it is compared with.
    return distribute_tensor(arg.clone(), mesh, [placement])


def _cases():
    """(name, op, args, input placements (one per tensor argument), expected output placements): every op's
    OpInfo.sharding_cases, each drawing from a generator of its own, so that one op's values do not depend on
    another's cases."""
    for op in OP_DB:
        g = torch.Generator().manual_seed(0)

        def rnd(*shape, g=g):
            return torch.randn(*shape, generator=g, dtype=torch.float64)

        yield from op.sharding_cases(rnd)


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def check_rules(mesh) -> list[str]:
    """Runs every case; returns the failures' descriptions."""
    failures = []
    for name, op, args, placements, expected in _cases():
        try:
            it = iter(placements)
            dargs = tuple(_dist(a, next(it), mesh) if isinstance(a, torch.Tensor) else a for a in args)
            with CommDebugMode() as comm:
                out = op(*dargs)
            want = [o for o in _as_list(op(*args)) if o is not None]
            got = [o for o in _as_list(out) if o is not None]
            assert len(got) == len(want) == len(expected), f"{len(got)} outputs, expected {len(expected)}"
            for k, (o, w, e) in enumerate(zip(got, want, expected)):
                assert isinstance(o, DTensor), f"output {k} is not a DTensor"
                assert list(o.placements) == [e], f"output {k} placed {o.placements}, expected {e}"
                torch.testing.assert_close(o.full_tensor(), w, msg=lambda m: f"output {k}: {m}")
            assert comm.get_total_counts() == 0, f"{comm.get_total_counts()} collectives before the result"
        except Exception:  # noqa: BLE001  (collected, reported by the test)
            failures.append(f"{name}: {traceback.format_exc(limit=3)}")
    return failures


def in_place_arguments_stay(mesh) -> list[str]:
    """An op that updates an argument in place (causal_conv1d.update's conv_state) runs where that argument is,
    the others redistributed to it, and refuses a placement none of its rules takes instead of updating a
    redistributed copy."""
    g = torch.Generator().manual_seed(0)
    x, state, w = (torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((4, 6), (4, 6, 5), (6, 4)))
    update = torch.ops.customops.causal_conv1d.update
    failures = []
    want_state = state.clone()
    want = update(x, want_state, w)
    dstate = distribute_tensor(state, mesh, [Shard(1)])
    out = update(distribute_tensor(x, mesh, [Shard(0)]), dstate, distribute_tensor(w, mesh, [Replicate()]))
    if list(dstate.placements) != [Shard(1)]:
        failures.append(f"conv_state placed {dstate.placements} after the update, expected Shard(1)")
    try:
        torch.testing.assert_close(out.full_tensor(), want)
        torch.testing.assert_close(dstate.full_tensor(), want_state)
    except AssertionError as e:
        failures.append(f"update of a channel-sharded state with a batch-sharded x: {e}")
    try:
        update(distribute_tensor(x, mesh, [Shard(1)]), distribute_tensor(state, mesh, [Shard(2)]),
               distribute_tensor(w, mesh, [Shard(0)]))
        failures.append("a conv_state sharded on its steps was accepted")
    except RuntimeError as e:
        if "updates conv_state in place" not in str(e):
            failures.append(f"a conv_state sharded on its steps: unexpected message {e}")
    return failures


def _every_layer_net():
    """scripts/two_gpu_check.py's network of every customops layer (the GPU check trains the same one)."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "two_gpu_check.py")
    spec = importlib.util.spec_from_file_location("two_gpu_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EveryLayer


def train_step_matches(mesh) -> list[str]:
    """A network of every customops layer: a step on batch-sharded DTensor inputs with replicated parameters
    gives the full batch's output and the same parameter gradients as the unsharded step."""
    torch.manual_seed(0)
    model = _every_layer_net()().double()
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64)
    points = torch.rand(4, 3, dtype=torch.float64) * 2 - 1
    want_out = model(x, points)
    want_out.square().mean().backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    distribute_module(model, mesh)  # parameters become replicated DTensors
    out = model(distribute_tensor(x, mesh, [Shard(0)]), distribute_tensor(points, mesh, [Shard(0)]))
    failures = []
    if list(out.placements) != [Shard(0)]:
        failures.append(f"model output placed {out.placements}, expected Shard(0)")
    try:
        torch.testing.assert_close(out.full_tensor(), want_out.detach())
    except AssertionError as e:
        failures.append(f"model output: {e}")
    out.square().mean().backward()
    for n, p in model.named_parameters():
        try:
            torch.testing.assert_close(p.grad.full_tensor(), want[n])
        except AssertionError as e:
            failures.append(f"gradient of {n}: {e}")
    return failures


def worker(rank: int, world: int, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    failures = []
    try:
        mesh = dist.device_mesh.init_device_mesh("cpu", (world,))
        for check in (check_rules, in_place_arguments_stay, train_step_matches):
            try:
                failures += check(mesh)
            except Exception:  # noqa: BLE001  (reported by the test)
                failures.append(f"{check.__name__}: {traceback.format_exc()}")
    finally:
        dist.barrier()  # both ranks done with every collective before the group goes
        dist.destroy_process_group()
    results.put((rank, failures))
