"""The C++ runners' command lines (examples/runner_args.h): each refuses what it cannot run, before loading
anything, with a message that says what is wrong."""

import subprocess

import pytest

import customops

pytestmark = pytest.mark.torch_independent

# Each runner's name for customops.runner_path, and the options it needs besides the model file.
RUNNERS = {"torchscript": [], "aoti": ["--inputs", "in.pt"], "executorch_runner": ["--inputs", "in.bin"]}


def _refusal(runner, *args):
    try:
        path = customops.runner_path(runner)
    except FileNotFoundError as e:  # the ExecuTorch runner is built only where the build's Python has executorch
        pytest.skip(str(e))
    done = subprocess.run([path, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_runner_names_what_is_wrong_with_its_command_line(runner):
    needed = RUNNERS[runner]
    assert f"usage: customops_{runner}" in _refusal(runner)
    if needed:
        assert f"usage: customops_{runner}" in _refusal(runner, "model")  # a required option left out
    assert "unexpected argument --bogus" in _refusal(runner, "model", *needed, "--bogus", "1")
    assert "missing value after --repeats" in _refusal(runner, "model", *needed, "--repeats")
    for count in ("0", "two", "3x"):
        assert "--repeats must be a whole number of at least 1" in _refusal(runner, "model", *needed, "--repeats",
                                                                             count)
