"""A Mamba-style block with customops' short convolution, trained on whole sequences and decoded token by token.

    python examples/mamba_block/mamba_block.py [--steps 20] [--tokens 6] [--out DIR]

``in_proj`` splits each token into a branch ``h`` and a gate ``z``; ``h`` goes through the causal depthwise
convolution with its SiLU (``customops.causal_conv1d(..., activation="silu")``), the gate mixes it
(``customops.silu_mul(z, h)``: ``silu(z) * h``, no SSM) and ``out_proj`` maps it back. ``forward(x)`` is the
training and prefill call over ``(B, L, D)`` and returns the convolution's final states with the output;
``step(token)`` decodes one ``(B, D)`` token with ``customops.causal_conv1d_update``, which updates the
``conv_state`` buffer in place. Every decoded step equals the forward of the whole sequence at that step.

The script trains a few steps on a toy task, prefills a prompt, decodes the rest and checks it against the forward,
then checks the decoding step in ExecuTorch after a prompt prefilled in PyTorch with ``customops.deploy.check(...,
runtime="executorch", calls=...)``: the step exported (``torch.export``: the buffer shows as a mutated buffer) and
lowered to a program whose mutable ``conv_state`` starts from the prefill's state and is updated by customops'
kernel, run by ExecuTorch's runtime one token a call against the eager steps. Needs ``pip install executorch`` and
customops' ExecuTorch kernels for the last part (skipped without them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

import customops
import customops.deploy


class MambaStyleBlock(nn.Module):
    """in_proj -> causal_conv1d(activation="silu") -> silu(z) * h -> out_proj, over (B, L, d_model).

    ``conv_state`` (``(batch, d_inner, d_conv - 1)``) is the decoding state: a buffer, so that ``torch.export``
    and ExecuTorch keep it with the module and see ``step`` write it."""

    def __init__(self, d_model: int = 16, d_inner: int = 32, d_conv: int = 4, batch: int = 1):
        super().__init__()
        self.in_proj = nn.Linear(d_model, 2 * d_inner)
        # (C, K), as causal_conv1d takes it; small taps, as nn.Conv1d's default initialisation gives.
        self.conv_weight = nn.Parameter(torch.empty(d_inner, d_conv).uniform_(-d_conv ** -0.5, d_conv ** -0.5))
        self.conv_bias = nn.Parameter(torch.zeros(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model)
        self.register_buffer("conv_state", torch.zeros(batch, d_inner, d_conv - 1))

    def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        """Training and prefill: ``x`` (B, L, d_model) -> (the output (B, L, d_model), the convolution's final
        states (B, d_inner, d_conv - 1), a ``conv_state`` to decode from)."""
        h, z = self.in_proj(x).chunk(2, dim=-1)
        # (B, L, C) viewed as (B, C, L): causal_conv1d reads Mamba's layout in place and keeps it.
        h, state = customops.causal_conv1d(h.transpose(1, 2), self.conv_weight, self.conv_bias, activation="silu",
                                           return_final_states=True)
        return self.out_proj(customops.silu_mul(z, h.transpose(1, 2))), state

    @torch.no_grad()
    def prefill(self, x: Tensor) -> Tensor:
        """The forward of a prompt (B, L, d_model), leaving its final states in ``conv_state``."""
        y, state = self(x)
        self.conv_state.copy_(state)
        return y

    def step(self, token: Tensor) -> Tensor:
        """Decodes one token (B, d_model) -> (B, d_model), updating ``conv_state`` in place. Inference only: call
        it under ``torch.no_grad()`` or ``torch.inference_mode()`` (the update has no gradient)."""
        h, z = self.in_proj(token).chunk(2, dim=-1)
        h = customops.causal_conv1d_update(h, self.conv_state, self.conv_weight, self.conv_bias, activation="silu")
        return self.out_proj(customops.silu_mul(z, h))


class DecodeStep(nn.Module):
    """The block's ``step`` as a module's forward, for ``torch.export`` and ExecuTorch (the block's buffer with it)."""

    def __init__(self, block: MambaStyleBlock):
        super().__init__()
        self.block = block

    def forward(self, token: Tensor) -> Tensor:
        return self.block.step(token)


def train(block: MambaStyleBlock, steps: int, seq_len: int = 12, seed: int = 0) -> list[float]:
    """A few Adam steps on a toy causal task (predict a running mix of the last three tokens); the losses."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(block.parameters(), lr=1e-2)
    d = block.in_proj.in_features
    losses = []
    for _ in range(steps):
        x = torch.randn(4, seq_len, d, generator=g)
        target = x + 0.5 * torch.roll(x, 1, dims=1) + 0.25 * torch.roll(x, 2, dims=1)
        y, _ = block(x)
        loss = torch.nn.functional.mse_loss(y, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def decode(block: MambaStyleBlock, x: Tensor, prompt: int) -> Tensor:
    """Prefills ``x[:, :prompt]`` then decodes the rest token by token: (B, L, d_model), the prompt's outputs then
    each step's."""
    outputs = [block.prefill(x[:, :prompt])]
    for t in range(prompt, x.shape[1]):
        outputs.append(block.step(x[:, t]).unsqueeze(1))
    return torch.cat(outputs, dim=1)


def export_step(block: MambaStyleBlock, token: Tensor) -> torch.export.ExportedProgram:
    """The decoding step exported (under no_grad: the update is inference only); ``conv_state`` is among the
    mutated buffers of its functionalised graph (``run_decompositions``, which ExecuTorch's lowering runs)."""
    with torch.no_grad():
        return torch.export.export(DecodeStep(block).eval(), (token,))


def check_executorch(block: MambaStyleBlock, tokens: Tensor, save_pte: Optional[str] = None, atol: float = 1e-5):
    """The decoding step in ExecuTorch, one call per token of ``tokens`` (B, T, d_model), against eager steps:
    ``customops.deploy.check`` exports it and lowers it (with XNNPACK and without) to a program whose mutable
    ``conv_state`` starts from the block's state (a prefill's) and is carried from call to call, and compares each
    call's output and the final state. The block is left as it was; ``save_pte`` writes the program (XNNPACK)."""
    calls = [tokens[:, t].contiguous() for t in range(tokens.shape[1])]
    return customops.deploy.check(DecodeStep(block).eval(), (calls[0],), runtime="executorch", calls=calls,
                                  atol=atol, save_pte=save_pte)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps")
    parser.add_argument("--tokens", type=int, default=6, help="tokens decoded after a prompt of as many")
    parser.add_argument("--out", type=Path, help="where to write the decoding step's .pte")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    block = MambaStyleBlock()
    losses = train(block, args.steps)
    print(f"trained {args.steps} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}")

    x = torch.randn(1, 2 * args.tokens, block.in_proj.in_features)
    with torch.no_grad():
        full, _ = block(x)
    decoded = decode(block, x, args.tokens)
    print(f"prefill {args.tokens} + decode {args.tokens}: largest difference from the forward "
          f"{float((decoded - full).abs().max()):.2e}")

    import importlib.util

    if importlib.util.find_spec("executorch") is None or customops.executorch.kernel_library() is None:
        print("ExecuTorch: skipped (needs executorch and customops' ExecuTorch kernels)")
        return 0
    # The prompt prefilled in PyTorch, the rest decoded by ExecuTorch from the prefill's state.
    block.prefill(x[:, :args.tokens])
    pte = None
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        pte = str(args.out / "mamba_step.pte")
    report = check_executorch(block, x[:, args.tokens:], save_pte=pte)
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
