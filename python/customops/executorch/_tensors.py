"""Tensors in the plain binary format the C++ runner (examples/executorch_runner.cpp) reads and writes, which needs
no libtorch: a uint32 count, then per tensor an int32 dtype (its c10/ExecuTorch ScalarType code), an int32 rank,
int64 sizes and the contiguous data, all little-endian."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import List, Sequence, Union

import torch

# ScalarType codes, the same in c10 and ExecuTorch.
_CODES = {torch.uint8: 0, torch.int8: 1, torch.int32: 3, torch.int64: 4, torch.float16: 5, torch.float32: 6,
          torch.float64: 7, torch.bool: 11, torch.bfloat16: 15}
_DTYPES = {code: dtype for dtype, code in _CODES.items()}


def save_tensors(path: Union[str, Path], tensors: Sequence[torch.Tensor]) -> None:
    """Writes `tensors` (CPU, any strides) for the runner's ``--inputs``."""
    with open(path, "wb") as f:
        f.write(struct.pack("<I", len(tensors)))
        for t in tensors:
            if t.dtype not in _CODES:
                raise TypeError(f"customops.executorch.save_tensors: {t.dtype} has no ExecuTorch ScalarType code")
            t = t.detach().cpu().contiguous()
            f.write(struct.pack(f"<ii{t.dim()}q", _CODES[t.dtype], t.dim(), *t.shape))
            f.write(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def load_tensors(path: Union[str, Path]) -> List[torch.Tensor]:
    """Reads the tensors the runner's ``--output`` wrote."""
    data = Path(path).read_bytes()
    (count,), offset = struct.unpack_from("<I", data), 4
    tensors = []
    for _ in range(count):
        code, rank = struct.unpack_from("<ii", data, offset)
        offset += 8
        sizes = struct.unpack_from(f"<{rank}q", data, offset)
        offset += 8 * rank
        dtype = _DTYPES[code]
        nbytes = torch.Size(sizes).numel() * dtype.itemsize
        raw = torch.frombuffer(bytearray(data[offset:offset + nbytes]), dtype=torch.uint8) if nbytes else \
            torch.empty(0, dtype=torch.uint8)
        tensors.append(raw.view(dtype).reshape(sizes))
        offset += nbytes
    return tensors
