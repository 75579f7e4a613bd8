"""How a family module states its ops' sharding rules, and their registration with DTensor.

A rule lists, for one mesh dimension, the placements of an op's outputs and of its tensor arguments (in
schema order, leaving out a bias that is None) under which each rank can run the op on its local shards,
with no communication, and get its share of the result. DTensor expands the rules over every mesh
dimension and redistributes any other input placements to the cheapest rule.

Why not ``torch.distributed.tensor.experimental.register_sharding``: it hashes only integer arguments into
DTensor's sharding cache, so two calls that differ only in stride, padding, output size or output_mask
(``int[2]``, ``SymInt[2]``, ``bool[]``, ``str`` in our schemas) would share one cached result, and the
output shapes it caches would be wrong. ``register_op_strategy``, on which it builds, takes the schema
information explicitly: every argument after the first non-tensor one goes into the cache key.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._op_schema import OpSchema, OpStrategy, RuntimeSchemaInfo
from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy
from torch.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard

__all__ = ["Partial", "Replicate", "Shard", "Rule", "register", "tensor_shape"]

# outputs' placements + inputs' placements (None for an output the op does not compute)
Rule = Sequence[Placement | None]
RuleFn = Callable[..., list[Rule]]


def tensor_shape(arg) -> tuple[int, ...] | None:
    """The global shape of a tensor argument as the rule functions see it (an OpStrategy), else None."""
    if isinstance(arg, OpStrategy):
        return tuple(arg.shape)
    return None


def _schema_info(op: torch._ops.OpOverload) -> RuntimeSchemaInfo:
    first_static = next((i for i, a in enumerate(op._schema.arguments)
                         if not isinstance(a.type, (torch.TensorType, torch.OptionalType))
                         or (isinstance(a.type, torch.OptionalType)
                             and not isinstance(a.type.getElementType(), torch.TensorType))), 100)
    return RuntimeSchemaInfo(static_argnum=first_static, needs_pytree=True)


def register(op: torch._ops.OpOverload, rules: RuleFn, *, written: int | None = None) -> None:
    """Registers ``rules(mesh_size, *args)`` for op: it receives the mesh's size and the op's arguments
    (tensors as OpStrategy, with ``.shape``; others as given) and returns the rules that hold for them.

    ``written``: the index of a tensor argument the op updates in place (``Tensor(a!)``, not returned). DTensor
    would redistribute it like any input, and the op would then update a temporary copy; so only the rules that
    leave it where it is are kept, and a placement that none of them takes is refused."""
    outputs = len(op._schema.returns)

    def strategy(op_schema: OpSchema):
        mesh = op_schema.get_mesh_from_args()
        found = rules(mesh.size(), *op_schema.args_schema, **op_schema.kwargs_schema)
        expanded = expand_to_full_mesh_op_strategy(mesh, op_schema, [list(r) for r in found], input_index=outputs)
        if written is not None:
            expanded = _in_place(op, op_schema, expanded, written)
        return expanded

    DTensor._op_dispatcher.sharding_propagator.register_op_strategy(op, strategy, _schema_info(op))


def _in_place(op: torch._ops.OpOverload, op_schema: OpSchema, expanded: OpStrategy, written: int) -> OpStrategy:
    # The written argument's position among the tensor arguments given (the rules leave out None ones).
    position = sum(isinstance(a, OpStrategy) for a in op_schema.args_schema[:written])
    current = op_schema.args_schema[written].strategies[0].output_spec.placements
    kept = [s for s in expanded.strategies if s.input_specs[position].placements == current]
    if not kept:
        name = op._schema.arguments[written].name
        options = sorted({str(tuple(s.input_specs[position].placements)) for s in expanded.strategies})
        raise RuntimeError(f"customops::{op._schema.name.split('::')[-1]}.{op._schema.overload_name} updates {name} "
                           f"in place, so it cannot be redistributed, and none of the op's sharding rules takes it "
                           f"placed {tuple(current)}; place it as one of: {', '.join(options)}")
    return OpStrategy(kept)
