"""scikit-build-core metadata provider (pyproject.toml): the wheel depends on exactly the
torch it was built against, since libcustomops.so links that libtorch's C++ ABI.

It runs in the build's Python, the interpreter whose torch CMake builds against
(CUSTOMOPS_PYTHON defaults to it under scikit-build-core).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def dynamic_metadata(settings: dict, project: dict) -> dict:
    field = settings.get("field", "dependencies")
    if field != "dependencies":
        raise RuntimeError(f"customops_torch_pin sets 'dependencies', not {field!r}")
    try:
        # The distribution's version ("2.11.0"), which `==` matches with any local tag (+cu130).
        torch_version = version("torch")
    except PackageNotFoundError as e:
        raise RuntimeError(
            "customops: building needs torch in the build's Python; use `pip install --no-build-isolation .` "
            "in an environment with torch, or let pip's isolated build install it"
        ) from e
    return {"dependencies": [f"torch=={torch_version}"]}
