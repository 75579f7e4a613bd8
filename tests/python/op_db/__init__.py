"""The operator table: one OpInfo per customops operator, and all that the generic tests know about it.

One module per family of ops (the families of python/customops/func/), each exporting ``OPS: list[OpInfo]``;
OP_DB is every family module's OPS, found by importing every module of this package whose name does not start
with "_" (shared pieces live in _common.py). Adding an operator to the tests means adding its OpInfo to its
family's module, or a new family module; every generic test (test_ops.py, test_properties.py, test_fuzz.py,
test_onnx.py, distributed_checks.py, ...) then runs over it. Each OpInfo gives:

- ``op``: the customops functional; ``ref``: the same maths in plain PyTorch, taking whatever the op takes,
- ``sample_inputs(device, dtype, requires_grad)``: inputs that must match the
  reference (include empty, non-contiguous and odd sizes),
- ``dynamic_samples(device, dtype)``: inputs of one structure in several sizes,
  for torch.compile(dynamic=True),
- ``error_inputs(device)``: bad inputs and the message they must raise,
- ``module(sample)``: a scriptable/exportable nn.Module and the tensors to call
  it with,
- ``backward_args(sample, grad)``: the arguments of customops::<name>_backward
  for a forward sample and a gradient of its output,
- dtypes per device and tolerances per dtype; ``supports_gradgrad``: whether
  gradients of gradients are checked,
- ``autocast``: what torch.autocast does to the op, as to its PyTorch
  counterpart: "lower_precision" (runs in the autocast dtype) or "input_dtype"
  (runs in its first tensor's dtype); ``autocast_samples(device, low_dtype,
  requires_grad)``: mixed-precision inputs beside the float32 samples (low-precision
  activations with float32 parameters, as under AMP),
- ``keeps_memory_format``: a channels_last input gives channels_last results
  (output and input gradient), as PyTorch's counterpart does;
  ``keeps_dense_strides``: a dense input of any strides gives an output of the
  same strides (elementwise ops, as PyTorch's).

For test_properties.py (hypothesis):

- ``cases(device)``: a strategy of random calls (strategies.Case) with the
  arguments the reference takes; shared pieces are in strategies.py,
- ``property_cost``: the examples a property test draws, relative to the
  profile's count: the cheap ops get more (the convolutions' references and
  gradients take most of the time),
- ``property_tolerance(case, dtype, (rtol, atol))``, optional: the (rtol, atol)
  of a drawn case where it depends on the case's sizes,
- ``gradient_term_scales(views, grad)``, optional: per tensor argument, the size
  of the largest terms its gradient sums (None: the result's own), where the
  result can cancel to far less than its terms; `views` are the reference's
  float64 arguments, `grad` the output's gradient.

For test_fuzz.py:

- ``fuzz_call(rng, backward, device, dtype)``: the arguments (fuzz_common.T for
  tensors) of a valid call of customops::<name>, or of <name>_backward, with
  small random sizes, drawn from the random.Random `rng`,
- ``fuzz_wrapper_args(rng, args)``, optional: changes a forward call's `args`,
  in place, to what the Python wrapper customops.<name> takes beyond the schema.

For test_onnx.py:

- ``onnx_nodes(sample)``: the ONNX nodes, [(op type, attributes it must have)],
  on the path to the sample's output in its export.

For distributed_checks.py (test_distributed.py):

- ``sharding_cases(rnd)``: DTensor cases of the op and its backward op, as
  (name, overload, args, one placement per tensor argument, the outputs'
  expected placements); ``rnd(*shape)`` gives float64 tensors of random values.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._common import DEFAULT_TOLERANCES, FLOATING, ErrorInput, OpInfo, SampleInput, SideBySide

__all__ = ["DEFAULT_TOLERANCES", "FLOATING", "ErrorInput", "OP_DB", "OpInfo", "SampleInput", "SideBySide"]


def _family_modules() -> list:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


OP_DB: list[OpInfo] = [op for module in _family_modules() for op in module.OPS]
