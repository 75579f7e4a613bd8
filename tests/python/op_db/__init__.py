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
- a sample of another overload than ``.default`` (``SampleInput.overload``, e.g.
  causal_conv1d's ``"mamba"``) goes through every generic path as the others do
  (``op`` takes its arguments; ``overload_of(sample)`` and
  ``backward_call(sample, grad)`` are what the tests call); the op then gives
  ``overload_backward_args(sample, grad)``: ``(args, kwargs)`` of
  ``<name>_backward.<overload>``. ``SampleInput.skips`` names the paths that cannot
  run a sample (``{"gradgrad": why}``); the tests leave it out of those only,
- dtypes per device and tolerances per dtype; ``supports_gradgrad``: whether
  gradients of gradients are checked,
- ``autocast``: what torch.autocast does to the op, as to its PyTorch
  counterpart: "lower_precision" (runs in the autocast dtype), "input_dtype"
  (runs in its first tensor's dtype) or "promote" (in the widest of its inputs', as mul); ``autocast_samples(device, low_dtype,
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
  in place, to what the Python wrapper customops.<name> takes beyond the schema,
- ``fuzz_overloads``, optional: {overload: fuzz_call} for the other overloads
  to search (customops::<name>.<overload>, and <name>_backward.<overload> where
  it exists), every argument in schema order, keyword-only ones included.

For test_onnx.py:

- ``onnx_nodes(sample)``: the ONNX nodes, [(op type, attributes it must have)],
  on the path to the sample's output in its export.

For test_concurrency.py and test_torchscript_cpp.py (calls from several threads and CUDA streams at once):

- ``cuda_concurrent_bitwise``: its CUDA results are the same bits whichever
  stream or host thread computes them, as the kernels promise. False where a
  library computes part of the op with reductions that may differ between
  streams and between host threads, which get handles and workspaces of their
  own (cuBLAS, in conv2d's explicit path): the results are then compared within
  a tolerance instead of bit for bit.

For test_tflite.py:

- ``converts_to_tflite``: False where no TF-Lite model can hold the op, through
  either converter (col2im: customops.deploy.tflite.unsupported says why); its
  samples must then be reported as unsupported, never converted into something
  else,
- ``takes_image``: the first tensor argument is an image, (N, C, H, W) or
  unbatched (C, H, W). onnx2tf takes a rank-3 input for a batch of 1-D signals,
  so such an op's unbatched samples must be reported as unsupported through it;
  other ops' rank-3 tensors (trilinear's (N, 8, F) features) convert as they are.

For test_inductor.py:

- ``atomic_backward_decomposition``: the Inductor decomposition of its backward
  (customops.inductor) adds with atomics, whose order varies from run to run;
  under torch.use_deterministic_algorithms(True) compiled graphs must keep the
  registered <name>_backward op instead.

For distributed_checks.py (test_distributed.py):

- ``sharding_cases(rnd)``: DTensor cases of the op and its backward op, as
  (name, overload, args, one placement per tensor argument, the outputs'
  expected placements); ``rnd(*shape)`` gives float64 tensors of random values.
  For an overload with keyword-only tensors the "overload" is a function that
  takes them positionally after the others and calls it.
"""

from __future__ import annotations

from customops._families import family_modules

from ._common import DEFAULT_TOLERANCES, FLOATING, ErrorInput, OpInfo, SampleInput, SideBySide

__all__ = ["DEFAULT_TOLERANCES", "FLOATING", "ErrorInput", "OP_DB", "OpInfo", "SampleInput", "SideBySide"]


# Found as the package's concerns find theirs (customops._families).
OP_DB: list[OpInfo] = [op for module in family_modules(__name__, __path__) for op in module.OPS]
