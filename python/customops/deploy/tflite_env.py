"""The TF-Lite converter environment: a virtual environment with onnx2tf,
TensorFlow (CPU) and the LiteRT interpreter, kept apart from torch's.

``python -m customops.deploy.tflite_env [DIR]`` creates it (about 2 GB, a few
minutes with a network; the packages are pinned in tflite-requirements.txt).
customops.deploy finds its Python, in this order: the ``python`` argument,
``CUSTOMOPS_TFLITE_PYTHON``, the environment in ``CUSTOMOPS_TFLITE_ENV`` or
the default folder (``~/.cache/customops/tflite-env``), on a source checkout
(``CUSTOMOPS_TFLITE_ENV`` unset) the one scripts/test.sh makes there
(``.venv-tflite``), and the running Python when it can import onnx2tf itself.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

REQUIREMENTS = Path(__file__).with_name("tflite-requirements.txt")
SETUP_COMMAND = "python -m customops.deploy.tflite_env"


def default_dir() -> Path:
    if os.environ.get("CUSTOMOPS_TFLITE_ENV"):
        return Path(os.environ["CUSTOMOPS_TFLITE_ENV"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "customops" / "tflite-env"


def _env_python(folder: Path) -> Path:
    return folder / "bin" / "python"


def checkout_dir() -> Optional[Path]:
    """The TF-Lite environment scripts/test.sh makes in a source checkout (.venv-tflite beside python/), where this
    package runs from one: so that a test run outside the test command (an operator's own tests,
    ``pytest --op NAME``) converts with it too instead of skipping. None on an installed package."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "python" / "customops" / "__init__.py").is_file():
        return None
    return root / ".venv-tflite"


def _has_converter() -> bool:
    """Whether this Python has onnx2tf and the LiteRT interpreter itself."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnx2tf", "ai_edge_litert"))


def python(explicit: Optional[str] = None) -> str:
    """The Python that converts and runs TF-Lite models (see the module's docstring)."""
    chosen = explicit or os.environ.get("CUSTOMOPS_TFLITE_PYTHON")
    if chosen:
        if not Path(chosen).exists():
            raise FileNotFoundError(f"customops.deploy: the TF-Lite Python {chosen} does not exist; create an "
                                    f"environment with `{SETUP_COMMAND}`")
        return str(chosen)
    folder = default_dir()
    if _env_python(folder).exists():
        return str(_env_python(folder))
    # Not where CUSTOMOPS_TFLITE_ENV names a folder: that asks for that environment alone (the test command's
    # oldest-torch leg names a missing one, to run no onnx2tf test there).
    checkout = checkout_dir() if not os.environ.get("CUSTOMOPS_TFLITE_ENV") else None
    if checkout is not None and _env_python(checkout).exists():
        return str(_env_python(checkout))
    if _has_converter():
        return sys.executable
    raise RuntimeError(f"customops.deploy: runtime='tflite' needs onnx2tf, TensorFlow and ai-edge-litert, "
                       f"which live in an environment of their own (their onnx and numpy pins clash with "
                       f"torch's). Create it once with `{SETUP_COMMAND}` (into {folder}), or set "
                       f"CUSTOMOPS_TFLITE_PYTHON to a Python that has them.")


def create(folder: Path, base_python: Optional[str] = None, wheels: Optional[Path] = None) -> Path:
    """Creates (or completes) the environment in ``folder``; returns its Python. With ``wheels``, the packages'
    wheels are kept in that folder (pip downloads only those missing there) and installed from it."""
    base = base_python or getattr(sys, "_base_executable", sys.executable)
    if not _env_python(folder).exists():
        subprocess.run([base, "-m", "venv", str(folder)], check=True)
    env_python = str(_env_python(folder))

    def pip(command: str, *args: str) -> None:
        subprocess.run([env_python, "-m", "pip", command, "-q", "--disable-pip-version-check", "--no-cache-dir",
                        *args], check=True)

    # Pinned whole: --no-deps keeps pip from pulling TensorFlow's GPU build and OpenCV's GUI build, which
    # onnx2tf names, beside the CPU and headless builds listed.
    requirements = ["--no-deps", "-r", str(REQUIREMENTS)]
    if wheels:
        pip("wheel", "-w", str(wheels), *requirements)
        requirements += ["--no-index", "--find-links", str(wheels)]
    pip("install", *requirements)
    subprocess.run([env_python, "-c", "import onnx2tf, tensorflow, ai_edge_litert"], check=True)
    return Path(env_python)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=SETUP_COMMAND,
                                     description="Create the environment that converts and runs TF-Lite models.")
    parser.add_argument("folder", nargs="?", type=Path, default=None,
                        help=f"where to create it (default: {default_dir()})")
    parser.add_argument("--base-python", help="the Python to create it with (default: this one's)")
    parser.add_argument("--wheels", type=Path, default=None,
                        help="a folder to keep the downloaded wheels in and install from (each downloaded once)")
    options = parser.parse_args(argv)
    folder = options.folder or default_dir()
    env_python = create(folder, options.base_python, options.wheels)
    print(f"customops: the TF-Lite environment is ready: {env_python}")
    if options.folder and options.folder != default_dir():
        print(f"  use it with CUSTOMOPS_TFLITE_PYTHON={env_python}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
