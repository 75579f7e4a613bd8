"""causal_conv1d(x (B, C, L), weight (C, K), bias (C)) and its backward.

Sequences are independent: x sharded on B with a replicated filter gives the output sharded on B, and the
weight and bias gradients, sums over B, are Partial. Channels are independent too: x sharded on C with the
filters and bias sharded on their C gives the output and every gradient sharded on C. The op is linear in x
and in the weight: a Partial one of them (the other replicated, no bias) gives a Partial output, and a Partial
grad_out Partial gradients. Time shards would need the K-1 steps before each shard: not local.
"""

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, Shard, register

ops = torch.ops.customops
R, P = Replicate(), Partial()


def _forward(mesh_size, x, weight, bias=None):
    def rule(out, x_, w_, b_):
        return [out, x_, w_] + ([b_] if bias is not None else [])

    rules = [rule(R, R, R, R), rule(Shard(0), Shard(0), R, R), rule(Shard(1), Shard(1), Shard(0), Shard(0))]
    if bias is None:
        rules += [[P, P, R], [P, R, P]]
    return rules


def _backward(mesh_size, g, x, weight, mask):
    def grads(gx, gw, gb):
        return [p if wanted else None for p, wanted in zip((gx, gw, gb), mask)]

    return [grads(R, R, R) + [R, R, R], grads(Shard(0), P, P) + [Shard(0), Shard(0), R],
            grads(Shard(1), Shard(0), Shard(0)) + [Shard(1), Shard(1), Shard(0)], grads(P, P, P) + [P, R, R]]


# Mamba's training call (causal_conv1d.mamba): seq_idx (B, L) and initial_states (B, C, K-1) go with x's batch;
# on channels, seq_idx is whole on every rank and initial_states sharded with x. Linear (Partial) only without an
# activation: in x and initial_states together, or in the weight.


def _mamba_forward(mesh_size, x, weight, bias=None, activation=None, seq_idx=None, initial_states=None):
    def rule(out, x_, w_, b_, s_, i_):
        return ([out, x_, w_] + ([b_] if bias is not None else []) + ([s_] if seq_idx is not None else [])
                + ([i_] if initial_states is not None else []))

    rules = [rule(R, R, R, R, R, R), rule(Shard(0), Shard(0), R, R, Shard(0), Shard(0)),
             rule(Shard(1), Shard(1), Shard(0), Shard(0), R, Shard(1))]
    if bias is None and activation is None:
        rules += [rule(P, P, R, None, R, P), rule(P, R, P, None, R, R)]
    return rules


def _mamba_backward(mesh_size, g, x, weight, bias, mask, activation=None, seq_idx=None, initial_states=None):
    def rule(gx, gw, gb, gi, g_, x_, w_, b_, s_, i_):
        outs = [p if wanted else None for p, wanted in zip((gx, gw, gb, gi), mask)]
        return (outs + [g_, x_, w_] + ([b_] if bias is not None else []) + ([s_] if seq_idx is not None else [])
                + ([i_] if initial_states is not None else []))

    rules = [rule(R, R, R, R, R, R, R, R, R, R),
             rule(Shard(0), P, P, Shard(0), Shard(0), Shard(0), R, R, Shard(0), Shard(0)),
             rule(Shard(1), Shard(0), Shard(0), Shard(1), Shard(1), Shard(1), Shard(0), Shard(0), R, Shard(1))]
    if activation is None:  # then linear in grad_out
        rules.append(rule(P, P, P, P, P, R, R, R, R, R))
    return rules


# The decoding step (causal_conv1d.update): conv_state (B_cache, C, S) is updated in place and stays where it is.
# Channels are independent: x, conv_state, weight and bias sharded on their C, cache_seqlens and
# conv_state_indices whole on every rank. Rows are independent without conv_state_indices: x, conv_state and
# cache_seqlens sharded on B with the filters replicated (with indices, a rank's rows of x may pick any row of the
# cache). Not linear: no Partial.


def _update(mesh_size, x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
            conv_state_indices=None):
    def rule(out, x_, s_, w_, b_, l_, i_):
        return ([out, x_, s_, w_] + ([b_] if bias is not None else []) + ([l_] if cache_seqlens is not None else [])
                + ([i_] if conv_state_indices is not None else []))

    rules = [rule(R, R, R, R, R, R, R), rule(Shard(1), Shard(1), Shard(1), Shard(0), Shard(0), R, R)]
    if conv_state_indices is None:
        rules.append(rule(Shard(0), Shard(0), Shard(0), R, R, Shard(0), R))
    return rules


def register_all() -> None:
    register(ops.causal_conv1d.default, _forward)
    register(ops.causal_conv1d_backward.default, _backward)
    register(ops.causal_conv1d.mamba, _mamba_forward)
    register(ops.causal_conv1d_backward.mamba, _mamba_backward)
    register(ops.causal_conv1d.update, _update, written=1)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
DOC_ROWS = [
    (
        "`causal_conv1d` (and backward)",
        "batch `Shard(0)` with replicated filters (weight and bias gradients `Partial`); channels: x `Shard(1)` "
        "with weight and bias `Shard(0)`; `Partial` x or weight without bias",
    ),
    (
        "`causal_conv1d.mamba` (and backward)",
        "as above, with `seq_idx` and `initial_states` sharded with x on the batch; on channels `seq_idx` "
        "replicated and `initial_states` `Shard(1)`; `Partial` only without an activation",
    ),
    (
        "`causal_conv1d.update`",
        "`conv_state` updated where it is: channels (x, `conv_state` `Shard(1)`, weight and bias `Shard(0)`); "
        "without `conv_state_indices`, batch (x, `conv_state`, `cache_seqlens` `Shard(0)`, filters replicated)",
    ),
]
