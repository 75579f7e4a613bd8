"""Checks of the DTensor sharding rules, run in every rank of a process group (test_distributed.py spawns
two CPU processes with gloo). Not a test module itself: pytest does not collect it.

Each case gives an op, its full-size arguments, placements for its tensor arguments and the placements its
outputs must come out with. The op runs on DTensors distributed that way; the result must be exactly where
the rule says (so no redistribution happened: CommDebugMode counts no collective) and, gathered, equal the
op on the full tensors.
"""

from __future__ import annotations

import os
import traceback

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_module, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode

import customops  # noqa: F401  (the ops and their rules)

ops = torch.ops.customops
R, P = Replicate(), Partial()


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
    return distribute_tensor(arg, mesh, [placement])


def _cases():
    """(name, op, args, input placements (one per tensor argument), expected output placements)."""
    g = torch.Generator().manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    x = rnd(4, 6, 9, 8)
    yield "quick_gelu batch", ops.quick_gelu.default, (x,), [Shard(0)], [Shard(0)]
    yield "quick_gelu width", ops.quick_gelu.default, (x,), [Shard(3)], [Shard(3)]
    gx = rnd(4, 6, 9, 8)
    yield "quick_gelu_backward channels", ops.quick_gelu_backward.default, (gx, x), [Shard(1), Shard(1)], [Shard(1)]
    yield "quick_gelu_backward partial", ops.quick_gelu_backward.default, (gx, x), [P, R], [P]

    win = ([3, 3], [1, 1], [1, 1], [2, 2])  # kernel, dilation, padding, stride
    img = rnd(4, 6, 9, 8)
    cols = ops.im2col.default(img, *win)
    yield "im2col batch", ops.im2col.default, (img, *win), [Shard(0)], [Shard(0)]
    yield "im2col channels", ops.im2col.default, (img, *win), [Shard(1)], [Shard(1)]
    yield "im2col partial", ops.im2col.default, (img, *win), [P], [P]
    yield "im2col unbatched channels", ops.im2col.default, (img[0], *win), [Shard(0)], [Shard(0)]
    yield "col2im batch", ops.col2im.default, (cols, [9, 8], *win), [Shard(0)], [Shard(0)]
    yield "col2im channels", ops.col2im.default, (cols, [9, 8], *win), [Shard(1)], [Shard(1)]
    yield "col2im partial", ops.col2im.default, (cols, [9, 8], *win), [P], [P]
    for pl in (Shard(0), Shard(1), P):
        yield f"im2col_backward {pl}", ops.im2col_backward.default, (cols, [9, 8], *win), [pl], [pl]
        yield f"col2im_backward {pl}", ops.col2im_backward.default, (img, *win), [pl], [pl]

    w, b = rnd(8, 6, 3, 3), rnd(8)
    conv = (x, w, b, [1, 1], [1, 1], [1, 1], 1)
    conv_nb = (x, w, None, [2, 1], [1, 0], [1, 1], 1)
    yield "conv2d batch", ops.conv2d.default, conv, [Shard(0), R, R], [Shard(0)]
    yield "conv2d out channels", ops.conv2d.default, conv, [R, Shard(0), Shard(0)], [Shard(1)]
    yield "conv2d in channels", ops.conv2d.default, conv_nb, [Shard(1), Shard(1)], [P]
    yield "conv2d partial", ops.conv2d.default, conv_nb, [P, R], [P]
    # Grouped: no channel rule (the local op would need groups / 2); DTensor gathers the channels first.
    conv_g = (x, rnd(8, 3, 3, 3), rnd(8), [1, 1], [1, 1], [1, 1], 2)
    yield "conv2d groups batch", ops.conv2d.default, conv_g, [Shard(0), R, R], [Shard(0)]
    go = rnd(4, 8, 9, 8)
    bwd = (go, x, w, [1, 1], [1, 1], [1, 1], 1, [True, True, True])
    yield "conv2d_backward batch", ops.conv2d_backward.default, bwd, [Shard(0), Shard(0), R], [Shard(0), P, P]
    yield ("conv2d_backward out channels", ops.conv2d_backward.default, bwd, [Shard(1), R, Shard(0)],
           [P, Shard(0), Shard(0)])
    yield ("conv2d_backward in channels", ops.conv2d_backward.default, bwd, [R, Shard(1), Shard(1)],
           [Shard(1), Shard(1), R])
    bwd_mask = (go, x, w, [1, 1], [1, 1], [1, 1], 1, [True, False, False])
    yield "conv2d_backward masked", ops.conv2d_backward.default, bwd_mask, [Shard(0), Shard(0), R], [Shard(0)]
    bwd_g = (go, x, conv_g[1], [1, 1], [1, 1], [1, 1], 2, [False, True, True])
    yield "conv2d_backward groups batch", ops.conv2d_backward.default, bwd_g, [Shard(0), Shard(0), R], [P, P]
    unbatched = (x[0], w, b, [1, 1], [1, 1], [1, 1], 1)
    yield "conv2d unbatched out channels", ops.conv2d.default, unbatched, [R, Shard(0), Shard(0)], [Shard(0)]

    dw, db = rnd(12, 1, 3, 3), rnd(12)  # channel multiplier 2
    dconv = (x, dw, db, [2, 2], [1, 1], [1, 1])
    yield "depthwise batch", ops.depthwise_conv2d.default, dconv, [Shard(0), R, R], [Shard(0)]
    yield "depthwise channels", ops.depthwise_conv2d.default, dconv, [Shard(1), Shard(0), Shard(0)], [Shard(1)]
    yield "depthwise partial", ops.depthwise_conv2d.default, (x, dw, None, [1, 1], [1, 1], [1, 1]), [P, R], [P]
    yield ("depthwise unbatched channels", ops.depthwise_conv2d.default, (x[0], dw, db, [1, 1], [1, 1], [1, 1]),
           [Shard(0), Shard(0), Shard(0)], [Shard(0)])
    dgo = rnd(4, 12, 5, 4)
    dbwd = (dgo, x, dw, [2, 2], [1, 1], [1, 1], [True, True, True])
    yield ("depthwise_backward batch", ops.depthwise_conv2d_backward.default, dbwd, [Shard(0), Shard(0), R],
           [Shard(0), P, P])
    yield ("depthwise_backward channels", ops.depthwise_conv2d_backward.default, dbwd, [Shard(1), Shard(1), Shard(0)],
           [Shard(1), Shard(0), Shard(0)])

    up = (x, [13, 17], "asymmetric")
    yield "upsample batch", ops.upsample_bilinear2d.default, up, [Shard(0)], [Shard(0)]
    yield "upsample channels", ops.upsample_bilinear2d.default, up, [Shard(1)], [Shard(1)]
    yield "upsample partial", ops.upsample_bilinear2d.default, up, [P], [P]
    ugo = rnd(4, 6, 13, 17)
    for pl in (Shard(0), Shard(1), P):
        yield (f"upsample_backward {pl}", ops.upsample_bilinear2d_backward.default, (ugo, [9, 8], "asymmetric"),
               [pl], [pl])

    feats, points = rnd(10, 8, 6), rnd(10, 3).clamp(-1, 1)
    yield "trilinear points", ops.trilinear_interpolation.default, (feats, points), [Shard(0), Shard(0)], [Shard(0)]
    yield "trilinear features", ops.trilinear_interpolation.default, (feats, points), [Shard(2), R], [Shard(1)]
    yield "trilinear partial", ops.trilinear_interpolation.default, (feats, points), [P, R], [P]
    tgo = rnd(10, 6)
    tb = (tgo, feats, points, [True, True])
    yield ("trilinear_backward points", ops.trilinear_interpolation_backward.default, tb,
           [Shard(0), Shard(0), Shard(0)], [Shard(0), Shard(0)])
    yield ("trilinear_backward features", ops.trilinear_interpolation_backward.default, tb, [Shard(1), Shard(2), R],
           [Shard(2), P])
    yield "trilinear_backward partial", ops.trilinear_interpolation_backward.default, tb, [P, R, R], [P, P]
    yield ("trilinear_backward features, feats only", ops.trilinear_interpolation_backward.default,
           (tgo, feats, points, [True, False]), [Shard(1), Shard(2), R], [Shard(2)])


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
        for check in (check_rules, train_step_matches):
            try:
                failures += check(mesh)
            except Exception:  # noqa: BLE001  (reported by the test)
                failures.append(f"{check.__name__}: {traceback.format_exc()}")
    finally:
        dist.barrier()  # both ranks done with every collective before the group goes
        dist.destroy_process_group()
    results.put((rank, failures))
