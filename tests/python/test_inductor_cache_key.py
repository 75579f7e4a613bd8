"""customops' part of torch.compile's cache keys (customops.inductor._cache_key): a warm on-disk cache hands back
a graph compiled by the same customops under the same choices, never one compiled under others."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch._inductor.lowering  # noqa: F401  (customops writes its part of the key once Inductor is loaded)

import customops
from customops.inductor import _cache_key

pytestmark = pytest.mark.torch_dependent


@pytest.fixture
def restored():
    """Puts back the choices and the tag a test changes."""
    tag, decomposed = torch.compiler.config.cache_key_tag, customops.inductor.decomposed()
    policies = {op: customops.backends.get(op) for op in customops.backends.ops()}
    benchmark = torch.backends.cudnn.benchmark
    yield
    torch.backends.cudnn.benchmark = benchmark
    for op, value in decomposed.items():
        customops.inductor.set_decomposed(op, value)
    for op, policy in policies.items():
        customops.backends.set(op, policy)
    torch.compiler.config.cache_key_tag = tag


def _ours() -> str:
    return torch.compiler.config.cache_key_tag.rsplit("|", 1)[-1]


def test_each_choice_a_compile_depends_on_has_a_key_of_its_own(restored):
    _cache_key.refresh()  # another test may have left a flag changed behind customops' back, and put it back
    start, policies = _cache_key.digest(), {op: customops.backends.get(op) for op in customops.backends.ops()}
    assert _ours() == "customops-" + start
    seen = {start}
    for op, value in customops.inductor.decomposed().items():
        customops.inductor.set_decomposed(op, not value)
        assert _ours() not in {"customops-" + d for d in seen}, op
        seen.add(_cache_key.digest())
    for op in policies:
        customops.backends.set(op, "customops" if policies[op] == "pytorch" else "pytorch")
        assert _ours() == "customops-" + _cache_key.digest() and _cache_key.digest() not in seen, op
        seen.add(_cache_key.digest())
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    assert _cache_key.digest() not in seen
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    for op, value in customops.inductor.decomposed().items():
        customops.inductor.set_decomposed(op, not value)
    for op, policy in policies.items():
        customops.backends.set(op, policy)
    assert _cache_key.digest() == start and _ours() == "customops-" + start


def test_the_user_s_own_tag_is_kept(restored):
    torch.compiler.config.cache_key_tag = "mine|customops-0000|other"
    _cache_key.refresh()
    assert torch.compiler.config.cache_key_tag == f"mine|other|customops-{_cache_key.digest()}"
    _cache_key.refresh()
    assert torch.compiler.config.cache_key_tag == f"mine|other|customops-{_cache_key.digest()}"


def test_a_compile_refreshes_the_tag_after_a_reset(restored):
    torch._dynamo.reset()  # drops every compile-start callback, customops' too
    customops.inductor.set_decomposed("quick_gelu", customops.inductor.decomposed()["quick_gelu"])
    torch.compiler.config.cache_key_tag = "mine"
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    torch._dynamo.reset()
    assert torch.compiler.config.cache_key_tag == f"mine|customops-{_cache_key.digest()}"


# One process per compile: what a user's next run finds in the on-disk cache the previous run left.
_RUN = """
import sys, torch, customops
from torch._dynamo.utils import counters
if sys.argv[1] == "kept":
    customops.inductor.set_decomposed("upsample_bilinear2d", False)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), customops.UpsampleBilinear2d(scale_factor=2))
x = torch.randn(2, 3, 8, 8)
step = torch.compile(model)
step(x).sum().backward()
with torch.profiler.profile() as prof:
    step(x).sum().backward()
calls = sum(e.name == "customops::upsample_bilinear2d" for e in prof.events())
hits = counters["aot_autograd"]["autograd_cache_hit"] + counters["inductor"]["fxgraph_cache_hit"]
print("result", calls, hits)
"""


def _compiled_run(cache_dir, choice: str, library=None) -> tuple[int, int]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "0"}
    if library is not None:
        env["CUSTOMOPS_LIBRARY"] = str(library)
    done = subprocess.run([sys.executable, "-c", _RUN, choice], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    calls, hits = next(line for line in done.stdout.splitlines() if line.startswith("result")).split()[1:]
    return int(calls), int(hits)


def test_a_warm_cache_keeps_graphs_apart_by_customops_and_its_choices(tmp_path):
    cache = tmp_path / "cache"
    # The default decomposes the resize: Inductor's gathers, no call of the op.
    assert _compiled_run(cache, "decomposed") == (0, 0)
    # Another build of the library (the same one with a byte appended, which the loader ignores), as after an
    # upgrade or a rebuild: nothing of the first run's is reused.
    other = tmp_path / "libcustomops.so"
    other.write_bytes(Path(customops.library_path()).read_bytes() + b"\0")
    assert _compiled_run(cache, "decomposed", other) == (0, 0)
    # Kept whole, with the default's graphs cached: the op, not the cached decomposed graph.
    assert _compiled_run(cache, "kept") == (1, 0)
    # The same customops and choice again find their graphs.
    calls, hits = _compiled_run(cache, "kept")
    assert calls == 1 and hits >= 1
