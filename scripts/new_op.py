#!/usr/bin/env python3
"""scripts/new_op.py NAME (--inputs X,... | --like OP) [...]: the operator scaffold, python -m customops.dev.new_op,
on this checkout, from any directory and with any python3, before any set-up (no environment, torch or build).

`python -m customops.dev.new_op` needs customops importable, which a fresh clone's python is not: this runs it with
the checkout's python/ first on the path, and on this checkout (--root) even where another checkout's customops is
installed. Its arguments are the module's (--help).
"""

import os
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
path = os.pathsep.join(p for p in (str(root / "python"), os.environ.get("PYTHONPATH", "")) if p)
args = sys.argv[1:]
if not any(a == "--root" or a.startswith("--root=") for a in args):
    args += ["--root", str(root)]
# Run as `-m`: the package then loads no library (customops/__init__.py), which a fresh clone has not built.
os.execve(sys.executable, [sys.executable, "-m", "customops.dev.new_op", *args], {**os.environ, "PYTHONPATH": path})
