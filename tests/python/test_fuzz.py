"""Bad input, searched: random arguments for every customops operator and its
backward op, called through torch.ops.customops.* (the schemas, not the Python
wrappers). Each call must run or raise a RuntimeError, ValueError, TypeError or
IndexError whose message names an argument of the op; never crash the process
(SIGFPE, SIGSEGV, abort) and never hang.

A call is a valid one of small random sizes with one to three arguments made
bad: ints from zero, signs, and the edges of int32 and int64 (2^62 and its
products overflow), lists of other lengths or types, tensors of other dtypes
(int, bool, complex), ranks, sizes (empty, huge at no memory: zero elements or
stride 0), layouts and devices (meta; cuda and cpu on a GPU machine), None;
made plainly, on tensors requiring grad (then the backward too), or under
inference_mode (the backends' kernels without the Autograd ones).

The calls run in a child process (this file run as a script) that writes each
call, as a line of Python, to a log before making it: a crash or a hang then
fails the test with that line, and the process running pytest lives on.
Reproduce a line with

    python tests/python/test_fuzz.py --repro '<line>'

CUSTOMOPS_FUZZ_CALLS sets the calls per device (CUSTOMOPS_FULL_TESTS=1: CI_CALLS,
about half a minute on an idle 2-core machine, with a fixed seed; else the first
fifth of those), CUSTOMOPS_FUZZ_SEED the seed (a long run: a large count and a
new seed).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

import torch

from fuzz_common import T, _t, _Unbuildable
from op_db import OP_DB

OPS = {op.name: op for op in OP_DB}
HERE = os.path.dirname(os.path.abspath(__file__))
CI_CALLS = 100000
SEED = int(os.environ.get("CUSTOMOPS_FUZZ_SEED", "20251126"))
# A call that writes nothing to the log for this long is taken for a hang.
HANG_S = 60.0
# The child's address space above what it uses at start: a valid call whose
# result would not fit (huge padding, output sizes) fails in the allocator
# instead of running the machine out of memory.
ADDRESS_SPACE_HEADROOM = 6 << 30

# --- reproducible tensors -------------------------------------------------------

_LAYOUTS = ("contiguous", "channels_last", "noncontiguous", "transposed", "expanded")


def _build(v):
    if isinstance(v, T):
        return v.build()
    if isinstance(v, list):
        return [_build(e) for e in v]
    return v


# --- valid calls of every op ----------------------------------------------------------


def _base_call(rng, name, device, dtype):
    """A valid call of customops::<name> with small random sizes: its OpInfo's fuzz_call (for an overload,
    ``<op>.<overload>``, its fuzz_overloads entry)."""
    packet, _, overload = name.partition(".")
    base = packet.removesuffix("_backward")
    fuzz_call = OPS[base].fuzz_overloads[overload] if overload else OPS[base].fuzz_call
    return fuzz_call(rng, base != packet, device, dtype)


def op_names() -> list[str]:
    """Every registered op, then the overloads the op table fuzzes (an op's and its backward's)."""
    import customops

    names = customops._library.registered_ops()
    for op in OP_DB:
        for overload in op.fuzz_overloads:
            names += [f"{packet}.{overload}" for packet in (op.name, op.name + "_backward")
                      if overload in getattr(torch.ops.customops, packet).overloads()]
    return names


def _overload(name):
    packet, _, overload = name.removeprefix("wrapper:").partition(".")
    return getattr(getattr(torch.ops.customops, packet), overload or "default")


def _schema(name):
    return _overload(name)._schema


def _split(name, args):
    """A call's arguments, in schema order, as (positional, keyword): keyword-only ones by name."""
    if name.startswith("wrapper:"):
        return list(args), {}
    schema = _schema(name).arguments
    return ([a for a, s in zip(args, schema) if not s.kwarg_only],
            {s.name: a for a, s in zip(args, schema) if s.kwarg_only})


# --- mutations -------------------------------------------------------------------------

# Zero, signs, the edges of int32 and int64, and values whose products or sums
# overflow int64 (2**62 * 4, 2**62 + 2**62).
INTERESTING_INTS = [0, 1, 2, 3, -1, -2, -7, 2**31 - 1, 2**31, -2**31, 2**32 + 1, 2**40, 2**61, 2**62, -2**62,
                    2**63 - 1, -2**63, 3 * 2**61, 2**62 + 1]
# A scalar argument's edges: zero of both signs, signs, the extremes and the non-finite (a pointwise op's range).
INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-300, -1e-300, 1e300, -1e300, float("inf"), float("-inf"), float("nan")]
_BAD_DTYPES = [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
               torch.float16, torch.bfloat16, torch.float32, torch.float64]
_STRINGS = ["", "nearest", "HALF_PIXEL", "half_pixel ", "align_corners\x00", "bilinear", "asymmetric", "x" * 300]


def _mutate_int(rng, v):
    return rng.choice(INTERESTING_INTS) if rng.random() < 0.85 else v + rng.choice([-1, 1])


def _mutate_list(rng, v, type_str):
    r = rng.random()
    if r < 0.6:
        v = list(v)
        for i in rng.sample(range(len(v)), rng.randint(1, len(v))) if v else []:
            v[i] = _mutate_int(rng, v[i]) if "bool" not in type_str else (not v[i])
        return v
    if r < 0.8:  # mismatched lengths
        n = rng.choice([0, 1, 3, 4])
        fill = [True] if "bool" in type_str else [1]
        return (list(v) + fill * 4)[:n]
    if r < 0.9:  # another type altogether
        return rng.choice([1.5, "2", None, [1.5, 2.0], [[1], [2]]])
    return rng.choice(INTERESTING_INTS) if "bool" not in type_str else rng.choice([True, 3])


def _mutate_tensor(rng, t, device, devices):
    if t is None:
        return T([rng.randint(0, 3)], torch.float32, device)
    shape, dtype, dev, layout, fill = list(t.shape), t.dtype, t.device, t.layout, t.fill
    r = rng.random()
    if r < 0.2:
        dtype = rng.choice(_BAD_DTYPES)
    elif r < 0.3 and shape:  # one dimension fewer or more
        shape = shape[1:] if rng.random() < 0.5 else [rng.randint(1, 2)] + shape
    elif r < 0.3:
        shape = [rng.randint(1, 3)]
    elif r < 0.5 and shape:  # one size changed: empty, one, a neighbour
        i = rng.randrange(len(shape))
        shape[i] = rng.choice([0, 1, shape[i] + 1, max(shape[i] - 1, 0), 8, 3])
    elif r < 0.6 and shape:  # huge sizes at no memory: an empty tensor, or stride 0
        i = rng.randrange(len(shape))
        shape[i] = rng.choice([2**31, 2**40, 2**62, 2**63 - 1])
        if rng.random() < 0.5:
            shape[(i + 1) % len(shape)] = 0
        else:
            layout = "expanded"
    elif r < 0.75:
        layout = rng.choice(_LAYOUTS)
    elif r < 0.85:
        dev = rng.choice(devices)
    elif r < 0.9:
        fill = "special"
    elif r < 0.95:
        return None
    else:
        return rng.choice([1.0, 2, [T(shape, dtype, dev)]])
    return T(shape, dtype, dev, layout, fill)


MODES = ("plain", "plain", "plain", "grad", "inference")
# The Python wrappers (customops.<op>) take the forward ops' schema arguments positionally, and more (an OpInfo's
# fuzz_wrapper_args).


def _inference(fn):
    """fn() under torch.inference_mode(): the Autograd kernels are skipped, the backends' reached directly."""
    with torch.inference_mode():
        return fn()


def _grad(fn):
    """fn() on tensors that require grad, and, where it runs, the backward through its floating outputs."""
    out = fn()
    outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
            if isinstance(o, torch.Tensor) and o.requires_grad]
    if outs:
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    return out


def random_call(rng, name, device, devices):
    """(name, args, mode) of a call: valid, or with one to three arguments made bad; mode is how it is made:
    plainly, on tensors requiring grad (then the backward too), or under inference_mode."""
    dtype = rng.choice([torch.float32, torch.float64, torch.float16, torch.bfloat16])
    args = _base_call(rng, name, device, dtype)
    schema = _schema(name)
    assert len(args) == len(schema.arguments), name
    if rng.random() < 0.9:
        for i in rng.sample(range(len(args)), rng.randint(1, min(3, len(args)))):
            type_str = str(schema.arguments[i].type)
            v = args[i]
            if isinstance(v, T) or "Tensor" in type_str:
                args[i] = _mutate_tensor(rng, v, device, devices)
                continue
            if type_str.startswith("Optional["):  # str? (an activation): None, or a mutation of the type's value
                if v is not None and rng.random() < 0.3:
                    args[i] = None
                    continue
                type_str = type_str[len("Optional["):-1]
            if type_str.endswith("]"):
                args[i] = _mutate_list(rng, v, type_str)
            elif type_str == "int":
                args[i] = _mutate_int(rng, v)
            elif type_str == "str":
                args[i] = rng.choice(_STRINGS)
            elif type_str == "float":
                args[i] = rng.choice(INTERESTING_FLOATS)
            elif type_str == "bool":
                args[i] = not v
    mode = rng.choice(MODES)
    if mode == "grad":
        for a in args:
            if isinstance(a, T):
                a.grad = True
    if not name.endswith("_backward") and "." not in name and rng.random() < 0.2:
        if OPS[name].fuzz_wrapper_args is not None:
            OPS[name].fuzz_wrapper_args(rng, args)
        name = "wrapper:" + name
    return name, args, mode


def call_line(name, args, mode="plain") -> str:
    target = f"customops.{name[8:]}" if name.startswith("wrapper:") else f"torch.ops.customops.{name}"
    positional, keyword = _split(name, args)
    call = f"{target}({', '.join([repr(a) for a in positional] + [f'{k}={v!r}' for k, v in keyword.items()])})"
    return call if mode == "plain" else f"_{mode}(lambda: {call})"


def _line_name(line) -> str:
    """The op a REGRESSIONS line calls, as random_call names it."""
    target = line.split("(", 1)[0]
    return target.removeprefix("torch.ops.customops.") if target.startswith("torch.ops.") else \
        "wrapper:" + target.removeprefix("customops.")


def _target(name):
    import customops

    if name.startswith("wrapper:"):
        return getattr(customops, name[8:])
    return _overload(name) if "." in name else getattr(torch.ops.customops, name)


def _eval_globals():
    import customops

    return {"torch": torch, "customops": customops, "_t": _t, "_grad": _grad, "_inference": _inference}


# --- what a clean failure is ---------------------------------------------------------

CLEAN_ERRORS = (RuntimeError, ValueError, TypeError, IndexError)
# A valid call whose result does not fit in memory fails in the allocator, as
# the same call of PyTorch's own op does: clean, though it names no argument.
_OUT_OF_MEMORY = re.compile(r"can't allocate memory|out of memory|std::bad_alloc|CUDA error: out of memory")


def names_an_argument(name, message) -> bool:
    names = [a.name for a in _schema(name).arguments]
    if name.startswith("wrapper:"):
        names += list(inspect.signature(_target(name)).parameters)
    return any(re.search(rf"\b{re.escape(n)}\b", message) for n in names)


def _dispatcher_refused(name, args, message) -> bool:
    """Messages of PyTorch's dispatcher, raised before any customops code runs, in the two cases where that is
    so (aten's operators give the same): a bool[N] argument (output_mask) of another length, which c10's
    unboxing cannot make a std::array<bool, N> (a kernel signature every backend's kernel shares), and a call
    with no tensor at all, which has no dispatch key."""
    schema = _schema(name).arguments
    if message.startswith("Tried to convert a List with"):
        return any(str(a.type) == "List[bool]" and a.N is not None and isinstance(v, list) and len(v) != a.N
                   for a, v in zip(schema, args))
    if message.startswith("There were no tensor arguments to this function"):
        return not any(isinstance(v, torch.Tensor) for v in args)
    return False


def check_result(name, exc, args=()) -> str | None:
    """None if the outcome is fine, else what is wrong with it."""
    if exc is None:
        return None
    if isinstance(exc, MemoryError):
        # A valid call too large for the child's address space: the allocator's std::bad_alloc reaches Python as
        # MemoryError (which allocation fails first, ATen's or a kernel's table, depends on the torch release).
        return None
    if not isinstance(exc, CLEAN_ERRORS):
        return f"raised {type(exc).__name__} (not RuntimeError/ValueError/TypeError/IndexError): {exc}"
    message = str(exc)
    if _OUT_OF_MEMORY.search(message) or _dispatcher_refused(name, args, message):
        return None
    if not names_an_argument(name, message):
        return f"{type(exc).__name__} names no argument of {name}: {message.splitlines()[0][:300]}"
    return None


# --- the child: runs the calls --------------------------------------------------------------


def _limit_address_space():
    import resource

    with open("/proc/self/statm") as f:
        vsz = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = vsz + ADDRESS_SPACE_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# Calls that crashed or misreported before their fixes (most have an ErrorInput in op_db too): the child makes
# them first, on the CPU, so that a regression fails here with its call rather than killing pytest. Each must run
# (the depthwise one with a one-tap kernel is valid) or fail cleanly.
REGRESSIONS = [
    # SIGFPE: kernel_size's product overflowed int64 to 0 and divided the rows.
    "torch.ops.customops.col2im(_t((3, 8, 5)), [5, 5], [2**62, 4], [1, 1], [0, 0], [1, 1])",
    "torch.ops.customops.im2col_backward(_t((1, 6, 3), torch.bfloat16), [2, 2], [2**62, 3 * 2**61], [2, 2], [1, 2],"
    " [2, 1])",
    "torch.ops.customops.col2im(_t((12, 2), torch.float16), [3, 2], 2**40, [2**63 - 1, 1], [1, 2], [3, 3])",
    # Heap corruption: dilation 2^63 - 1 over a kernel of height 1 overflowed the CPU kernel's row chains.
    "torch.ops.customops.depthwise_conv2d(_t((1, 3, 2, 5), torch.bfloat16), _t((6, 1, 1, 3), torch.bfloat16),"
    " _t((6,), torch.bfloat16), [1, 1], [1, 2], [2**63 - 1, 2])",
    # SIGSEGV: a stride past the input (one output) times the blocked CPU forward's whole blocks of columns.
    "torch.ops.customops.depthwise_conv2d(_t((3, 3, 5), torch.float64), _t((3, 1, 2, 1), torch.float64),"
    " _t((3,), torch.float64), 2**63 - 1, [0, 0], [1, 1])",
    # The same with a kernel of height 2: the padded plane's size wrapped.
    "torch.ops.customops.depthwise_conv2d(_t((1, 1, 3, 3)), _t((1, 1, 2, 1)), None, [1, 1], [2**61, 0], [2**62, 1])",
    # A dilated extent wrapping past int64 gave a plausible output size.
    "torch.ops.customops.conv2d(_t((1, 2, 5, 5)), _t((2, 1, 1, 3)), None, [1, 1], [2, 2], [2, 3 * 2**61], 2)",
    # Sizes below -2^62 (SymInts the dispatcher cannot make int64_t) and results past int64 (at::empty's message).
    "torch.ops.customops.upsample_bilinear2d(_t((1, 3, 3, 3)), [-2**63, 2**62], 'asymmetric')",
    "torch.ops.customops.upsample_bilinear2d(_t((0, 3, 2, 2)), [3 * 2**61, 5], 'align_corners')",
    "torch.ops.customops.im2col(_t((2, 1, 5, 2)), [3, 3], [1, 2], [2**61, 2], [1, 3])",
    # None for a tensor: autograd's bookkeeping failed on it first ("tensor does not have a device").
    "torch.ops.customops.quick_gelu_backward(None, _t(()))",
    "torch.ops.customops.trilinear_interpolation_backward(_t((2, 2)), _t((2, 8, 2)), None, [True, False])",
    # An expanded input too large to pad for an asymmetric 'same' (F.pad's message named nothing).
    "customops.conv2d(_t((0, 2**62, 4, 3), torch.float16, 'cpu', 'expanded'), _t((1, 3, 2, 2), torch.float16), None,"
    " [1, 1], 'same', [2, 1], 1)",
    "customops.depthwise_conv2d(_t((0, 3, 2**62, 3), torch.float16, 'cpu', 'expanded'),"
    " _t((3, 1, 2, 2), torch.float16), None, 1, 'same')",
    # UBSan: an output size of 2^63 - 1 at stride 1 gave 2^63 window positions (signed overflow).
    "torch.ops.customops.col2im(_t((0, 8, 8)), [4, 2**63 - 1], [2, 2], [2, 1], [2, 1], [3, 1])",
    # An expanded tensor too large to make dense (at::empty's message named nothing).
    "torch.ops.customops.quick_gelu(_t((2**63 - 1,), torch.bfloat16, 'cpu', 'expanded'))",
]


def _reaches(device, built) -> bool:
    """Whether a tensor of the call (or of a list in it) is on `device`."""
    items = [b for a in built for b in (a if isinstance(a, (list, tuple)) else [a])]
    return any(isinstance(t, torch.Tensor) and t.device.type == device for t in items)


def run_child(seed, calls, device, log_path, findings_path, start=0):
    """Makes calls start..calls-1 of the seed's sequence (the regressions first where start is 0)."""
    import customops  # noqa: F401

    if device == "cpu":
        _limit_address_space()
    else:
        torch.cuda.set_per_process_memory_fraction(0.25)
    devices = ["cpu", "meta"] + (["cuda"] if torch.cuda.is_available() else [])
    names = op_names()
    rng = random.Random(seed)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    # Outcomes and findings are written as they come, a JSON line each: a child that dies keeps what it found.
    record = os.open(findings_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)

    def note(entry):
        os.write(record, (json.dumps(entry) + "\n").encode())

    for line in REGRESSIONS if device == "cpu" and start == 0 else []:
        os.write(log, (line + "\n").encode())
        name = _line_name(line)
        exc = None
        try:
            eval(line, _eval_globals())
        except BaseException as e:  # noqa: BLE001
            exc = e
        problem = check_result(name, exc)
        if problem is not None:
            note({"call": line, "problem": problem})
    for i in range(calls):
        name, args, mode = random_call(rng, names[i % len(names)], device, devices)
        if i < start:  # made by an earlier child: drawn again only to reach the same sequence
            continue
        line = call_line(name, args, mode)
        os.write(log, (line + "\n").encode())
        try:
            built = _build(args)
        except (_Unbuildable, RuntimeError):  # e.g. strides past int64: not the op's to check
            note({"outcome": "skipped"})
            continue
        if device != "cpu" and not _reaches(device, built):
            # Only CPU (or meta) tensors left: the CPU child makes such calls, under its address-space limit, which a
            # CUDA process cannot have (a valid CPU call of a terabyte result would run, not fail).
            note({"outcome": "skipped"})
            continue
        exc = None
        try:
            positional, keyword = _split(name, built)
            call = functools.partial(_target(name), *positional, **keyword)
            _grad(call) if mode == "grad" else _inference(call) if mode == "inference" else call()
        except BaseException as e:  # noqa: BLE001  (KeyboardInterrupt aside, everything is a finding)
            if isinstance(e, KeyboardInterrupt):
                raise
            exc = e
        note({"outcome": "ok" if exc is None else "error"})
        problem = check_result(name, exc, built)
        if problem is not None:
            note({"call": line, "problem": problem})
        if device == "cuda":
            torch.cuda.synchronize()  # an asynchronous fault belongs to this call
    os.write(log, b"# done\n")
    os.close(log)
    os.close(record)


def repro(line):
    import customops  # noqa: F401

    print(line)
    print(eval(line, _eval_globals()))


# --- the test ---------------------------------------------------------------------------------------

import pytest  # noqa: E402

from conftest import full_or_sample, requires_cuda  # noqa: E402

pytestmark = pytest.mark.torch_independent


def _calls(device="cpu") -> int:
    # A CUDA call synchronizes after it (so that an asynchronous fault is blamed on it): a third as many. The compact
    # sample, the first fifth of the sequence, still calls every op (they take turns).
    calls = full_or_sample(CI_CALLS, CI_CALLS // 5)
    return int(os.environ.get("CUSTOMOPS_FUZZ_CALLS", calls if device == "cpu" else calls // 3))


# AddressSanitizer's operator new cannot throw std::bad_alloc: an allocation past the child's memory aborts the
# child with one of these reports (allocator_may_return_null covers malloc only, which ATen's allocator uses).
_SANITIZER_OUT_OF_MEMORY = re.compile(r"AddressSanitizer: (out-of-memory|allocation-size-too-big|requested allocation "
                                      r"size .* exceeds maximum)")


def run_fuzz(device, calls, seed=SEED, script=__file__, hang_s=HANG_S):
    """Runs the child; returns its findings, or fails with the call that crashed or hung it. A child that a
    sanitizer stopped for running out of memory in a call (a std::bad_alloc, unsanitized) counts that call as
    out of memory, and a new child goes on from the next call."""
    result = {"findings": [], "outcomes": {"ok": 0, "error": 0, "skipped": 0, "out_of_memory": 0}}
    start = 0
    while True:
        status, log, output, recorded = _run_child(device, calls, seed, script, hang_s, start)
        for entry in recorded:
            if "outcome" in entry:
                result["outcomes"][entry["outcome"]] += 1
            else:
                result["findings"].append(entry)
        if status is None:
            return result
        regressions = len(REGRESSIONS) if device == "cpu" and start == 0 and script == __file__ else 0
        died_at = start + len(log) - regressions - 1  # the fuzz call that was running, if not a regression
        if status == "SIGABRT" and _SANITIZER_OUT_OF_MEMORY.search(output) and died_at >= start:
            result["outcomes"]["out_of_memory"] += 1
            start = died_at + 1
            if start < calls:
                continue
            return result
        how = f"signal {status}" if status.startswith("SIG") else status
        pytest.fail(f"the fuzz child died ({how}) in the call\n  {_last_call(log)}\n"
                    f"reproduce: python {os.path.relpath(__file__)} --repro '<the call>'\n{output[-3000:]}")


def _run_child(device, calls, seed, script, hang_s, start):
    """(how the child died or None, its log lines, its output, what it recorded)."""
    with tempfile.TemporaryDirectory() as tmp:
        log_path, findings_path = os.path.join(tmp, "calls.log"), os.path.join(tmp, "findings.json")
        cmd = [sys.executable, os.path.abspath(script), "--child", "--seed", str(seed), "--calls", str(calls),
               "--start", str(start), "--device", device, "--log", log_path, "--findings", findings_path]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
        child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        last_size, last_change = -1, time.monotonic()
        while child.poll() is None:
            time.sleep(0.2)
            size = os.path.getsize(log_path) if os.path.exists(log_path) else 0
            if size != last_size:
                last_size, last_change = size, time.monotonic()
            elif time.monotonic() - last_change > hang_s:
                child.kill()
                child.wait()
                pytest.fail(f"hang: no progress for {hang_s:.0f} s in the call\n  {_last_call(_log_lines(log_path))}")
        output = child.stdout.read().decode(errors="replace")
        log = _log_lines(log_path)
        recorded = []
        if os.path.exists(findings_path):
            with open(findings_path) as f:
                recorded = [json.loads(line) for line in f if line.endswith("\n")]  # a last line cut off: dropped
        how = None
        if child.returncode != 0:
            how = signal.Signals(-child.returncode).name if child.returncode < 0 else f"exit code {child.returncode}"
        return how, log, output, recorded


def _log_lines(log_path) -> list:
    if not os.path.exists(log_path):
        return []
    with open(log_path) as f:
        return [line for line in f.read().splitlines() if not line.startswith("# done")]


def _last_call(lines) -> str:
    return lines[-1] if lines else "(no call started)"


def _report(result) -> str:
    findings = result["findings"]
    shown = "\n".join(f"  {f['call']}\n    -> {f['problem']}" for f in findings[:20])
    return f"{len(findings)} bad outcomes (of {result['outcomes']}):\n{shown}"


@pytest.mark.every_op
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=requires_cuda)])
def test_fuzz_ops_never_crash_and_errors_name_arguments(device):
    result = run_fuzz(device, _calls(device))
    assert not result["findings"], _report(result)
    # The generator must keep reaching the kernels, not only the checks.
    assert result["outcomes"]["ok"] > _calls(device) // 20, result["outcomes"]


def test_fuzz_harness_reports_a_crash_with_its_call(tmp_path):
    """The parent names the call that killed the child (the child here kills itself)."""
    script = tmp_path / "crash.py"
    script.write_text("import os, signal, sys\nlog = sys.argv[sys.argv.index('--log') + 1]\n"
                      "open(log, 'w').write('first()\\nsecond()\\n')\nos.kill(os.getpid(), signal.SIGFPE)\n")
    with pytest.raises(pytest.fail.Exception, match=r"signal SIGFPE\) in the call\n  second\(\)"):
        run_fuzz("cpu", 1, script=script)


def test_fuzz_harness_goes_on_after_a_sanitizer_out_of_memory(tmp_path):
    """A child that AddressSanitizer stopped for an allocation past memory: that call counts as out of memory and
    a new child makes the calls after it."""
    script = tmp_path / "oom.py"
    script.write_text(
        "import json, os, sys\na = sys.argv\nopt = lambda k: a[a.index(k) + 1]\nstart = int(opt('--start'))\n"
        "open(opt('--log'), 'w').write(''.join(f'call{i}()\\n' for i in range(start, 2 if start == 0 else 3)))\n"
        "if start == 0:\n    print('==1==ERROR: AddressSanitizer: out-of-memory', flush=True)\n    os.abort()\n"
        "open(opt('--findings'), 'w').write('{\"outcome\": \"ok\"}\\n')\n")
    result = run_fuzz("cpu", 3, script=script)
    assert result == {"findings": [], "outcomes": {"ok": 1, "error": 0, "skipped": 0, "out_of_memory": 1}}


def test_fuzz_harness_reports_a_hang_with_its_call(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import sys, time\nlog = sys.argv[sys.argv.index('--log') + 1]\n"
                      "open(log, 'w').write('stuck()\\n')\ntime.sleep(600)\n")
    with pytest.raises(pytest.fail.Exception, match=r"hang: no progress for 2 s in the call\n  stuck\(\)"):
        run_fuzz("cpu", 1, script=script, hang_s=2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--repro")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--calls", type=int, default=CI_CALLS)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--log")
    parser.add_argument("--findings")
    opts = parser.parse_args()
    if opts.repro:
        repro(opts.repro)
    else:
        run_child(opts.seed, opts.calls, opts.device, opts.log, opts.findings, opts.start)
