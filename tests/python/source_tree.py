"""A copy of the checkout's tracked sources, for the tests that build one as a fresh clone would."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def copy_tracked_sources(dst: Path) -> None:
    """Copies every file git tracks into `dst`; skips the test where the tree is not a git checkout."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked sources cannot be listed")
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dst / name)
