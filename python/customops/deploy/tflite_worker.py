"""ONNX -> TF-Lite with onnx2tf, and the LiteRT interpreter on the result.

Runs in the TF-Lite environment's Python (customops.deploy.tflite_env), which
has onnx2tf, TensorFlow and ai-edge-litert but neither torch nor customops:
onnx2tf pins an onnx and a numpy that the torch environment does not take, so
the two live apart and talk through files. customops.deploy.tflite starts
this file as ``python -I tflite_worker.py JOB.json`` (``-I``: the package's
folder is not put on sys.path) and reads the JSON it writes back.

The job: ``onnx`` (model path), ``workdir``, ``inputs_npz`` (the example
inputs in the ONNX model's layout, saved in input order), ``outputs`` (the
ONNX output names), ``resolvers`` (LiteRT kernel options to run),
``quantize`` (null, or ``{"calibration_npz": path}`` for a full-integer
model), ``keep_shape_inputs`` (inputs onnx2tf must not take for images).
The result (``workdir/result.json``): the .tflite path, its operators with
their options, and per kernel option an .npz of every output.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time

import numpy as np

# onnx2tf reads this file from the working directory when every input is a batch of 3-channel images (for
# its own output check and for int8 calibration), and downloads it otherwise.
ONNX2TF_SAMPLE_FILE = "calibration_image_sample_data_20x128x128x3_float32.npy"


def to_layout(array: np.ndarray, shape, channels_last: bool) -> np.ndarray:
    """``array`` (channels first, as PyTorch and ONNX have it) for a TF-Lite input of ``shape``: channels last
    where the converter made the input so (onnx2tf, for the inputs it takes for images), and reshaped where
    the converter added or dropped dimensions of size 1 (a 0-d tensor is (1,) in TF-Lite)."""
    shape = tuple(int(s) for s in shape)
    if channels_last and array.ndim >= 3:
        array = np.ascontiguousarray(np.moveaxis(array, 1, -1))
    if array.shape != shape and not same_but_ones(array.shape, shape):
        raise ValueError(f"an input of shape {array.shape} does not fit the TF-Lite input {shape}")
    return array.reshape(shape)


def same_but_ones(a, b) -> bool:
    """Whether shapes ``a`` and ``b`` differ only by dimensions of size 1."""
    return [d for d in a if d != 1] == [d for d in b if d != 1]


def operators(path: str):
    """The model's operators in execution order: (name, options) per operator."""
    from ai_edge_litert import schema_py_generated as schema

    with open(path, "rb") as f:
        model = schema.ModelT.InitFromPackedBuf(f.read(), 0)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    ops = []
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            name = names.get(builtin, str(builtin))
            if name == "CUSTOM":
                custom = code.customCode.decode() if isinstance(code.customCode, bytes) else code.customCode
                name = f"CUSTOM:{custom}"
            options = {}
            if op.builtinOptions is not None:
                for key, value in vars(op.builtinOptions).items():
                    if isinstance(value, (bool, int, float)):
                        options[key] = value
            ops.append({"op": name, "options": options})
    return ops


def _convert(job, workdir: str):
    import onnx2tf

    sample = os.path.join(workdir, ONNX2TF_SAMPLE_FILE)
    if not os.path.exists(sample):
        np.save(sample, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
    kwargs = {}
    quantize = job.get("quantize")
    if quantize:
        calibration = np.load(quantize["calibration_npz"])
        paths = []
        for i, name in enumerate(calibration.files):
            data = calibration[name]
            if data.ndim == 4:
                data = np.moveaxis(data, 1, -1)  # onnx2tf calibrates in its NHWC layout
            path = os.path.join(workdir, f"calibration_{i}.npy")
            np.save(path, np.ascontiguousarray(data))
            zeros, ones = np.zeros(data.shape[-1], np.float32), np.ones(data.shape[-1], np.float32)
            paths.append([name, path, zeros, ones])
        kwargs.update(output_integer_quantized_tflite=True, custom_input_op_name_np_data_path=paths,
                      quant_type=quantize.get("quant_type", "per-channel"))
    out = os.path.join(workdir, "saved_model")
    log = io.StringIO()
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        with contextlib.redirect_stdout(log):
            onnx2tf.convert(input_onnx_file_path=job["onnx"], output_folder_path=out, non_verbose=True,
                            copy_onnx_input_output_names_to_tflite=True, output_signaturedefs=True,
                            keep_shape_absolutely_input_names=job.get("keep_shape_inputs") or None, **kwargs)
    finally:
        os.chdir(cwd)
    stem = os.path.splitext(os.path.basename(job["onnx"]))[0]
    suffix = "full_integer_quant" if quantize else "float32"
    return os.path.join(out, f"{stem}_{suffix}.tflite"), log.getvalue()


class _PlainRunner:
    """The interpreter behind a signature runner's interface, for a model without signatures (onnx2tf writes
    none for some graphs): its inputs and outputs by tensor name, in tensor order."""

    def __init__(self, interpreter) -> None:
        self.interpreter = interpreter
        interpreter.allocate_tensors()
        self.inputs = {d["name"]: d for d in interpreter.get_input_details()}
        self.outputs = {d["name"]: d for d in interpreter.get_output_details()}

    def get_input_details(self):
        return self.inputs

    def get_output_details(self):
        return self.outputs

    def __call__(self, **feeds):
        for name, value in feeds.items():
            self.interpreter.set_tensor(self.inputs[name]["index"], value)
        self.interpreter.invoke()
        return {name: self.interpreter.get_tensor(d["index"]) for name, d in self.outputs.items()}


def _runner(path: str, resolver: str):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType[resolver])
    if interpreter.get_signature_list():
        return interpreter.get_signature_runner()
    return _PlainRunner(interpreter)


def _feed(value: np.ndarray, detail, channels_last: bool) -> np.ndarray:
    """``value`` in the TF-Lite input's layout, and quantized where the input is."""
    value = to_layout(value, detail["shape"], channels_last)
    scale, zero_point = detail["quantization"]
    if scale:
        info = np.iinfo(detail["dtype"])
        value = np.clip(np.round(value / scale) + zero_point, info.min, info.max)
    return value.astype(detail["dtype"])


def _result(value: np.ndarray, detail) -> np.ndarray:
    scale, zero_point = detail["quantization"]
    return (value.astype(np.float32) - zero_point) * scale if scale else value


def _run(path: str, resolver: str, inputs, output_names, kept=()):
    """Runs the onnx2tf model on ``inputs`` (ONNX input name -> array; those in ``kept`` keep their layout, the
    others of rank 4 are images onnx2tf made NHWC); its outputs by ONNX output name."""
    runner = _runner(path, resolver)
    details = runner.get_input_details()
    if len(details) != len(inputs):
        raise RuntimeError(f"the TF-Lite model takes {len(details)} inputs, the example has {len(inputs)}")
    feeds = {key: _feed(value, details[key], name not in kept and value.ndim == 4)
             for key, (name, value) in zip(_ordered(details, list(inputs)), inputs.items())}
    results = runner(**feeds)
    out_details = runner.get_output_details()
    if all(name in results for name in output_names):
        keys = list(output_names)
    elif isinstance(runner, _PlainRunner) or all(key.startswith("output_") for key in results):
        # Names of TensorFlow's (Identity, Identity_1, ...; output_0, output_1, ... in a quantized model's
        # signature), in output order.
        keys = sorted(results, key=_natural)
    else:
        keys = [_sanitized(name, results) for name in output_names]
    return {name: _result(results[key], out_details[key]) for name, key in zip(output_names, keys)}


def _natural(name: str):
    digits = "".join(c for c in reversed(name) if c.isdigit())[::-1] if name[-1:].isdigit() else ""
    return (name[:len(name) - len(digits)], int(digits) if digits else -1)


def run_in_order(path: str, resolver: str, inputs):
    """Runs a model whose signature names its inputs and outputs in order (``args_0``, ``output_0``, ...:
    litert-torch's, in PyTorch's layout); ``inputs`` in that order, the outputs in that order."""
    runner = _runner(path, resolver)
    details = runner.get_input_details()
    keys = sorted(details, key=_natural)
    if len(keys) != len(inputs):
        raise RuntimeError(f"the TF-Lite model takes {len(keys)} inputs, the example has {len(inputs)}")
    results = runner(**{key: _feed(value, details[key], False) for key, value in zip(keys, inputs)})
    out_details = runner.get_output_details()
    return [_result(results[key], out_details[key]) for key in sorted(results, key=_natural)]


def _ordered(details, names):
    """The TF-Lite input names in the order of the ONNX inputs ``names``."""
    if all(n in details for n in names):
        return list(names)
    if all(key.startswith("inputs_") for key in details):  # no signature: inputs_0, inputs_1, ... in order
        return sorted(details, key=_natural)
    return [_sanitized(n, details) for n in names]


def _sanitized(name: str, table):
    """onnx2tf's spelling of an ONNX name (it replaces characters TensorFlow refuses)."""
    for key in table:
        if key.replace("_", "") == "".join(c for c in name if c.isalnum()):
            return key
    raise KeyError(f"no TF-Lite tensor for the ONNX value {name!r} (have {sorted(table)})")


def main(job_path: str) -> int:
    with open(job_path) as f:
        job = json.load(f)
    workdir = job["workdir"]
    result = {"ok": False}
    try:
        start = time.perf_counter()
        path, log = _convert(job, workdir)
        result.update(tflite=path, convert_seconds=time.perf_counter() - start, operators=operators(path))
        inputs = dict(np.load(job["inputs_npz"]).items())
        result["runs"] = {}
        for resolver in job["resolvers"]:
            outputs = _run(path, resolver, inputs, job["outputs"], set(job.get("keep_shape_inputs") or ()))
            saved = os.path.join(workdir, f"outputs_{resolver}.npz")
            np.savez(saved, **{f"o{i}": outputs[name] for i, name in enumerate(job["outputs"])})
            result["runs"][resolver] = saved
        result["ok"] = True
    except Exception as e:  # reported to the caller, which raises with it
        import traceback

        result.update(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc(),
                      log=locals().get("log", ""))
    with open(os.path.join(workdir, "result.json"), "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
