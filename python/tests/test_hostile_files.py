"""Hostile files and settings through the Python package (issue 26): a model directory whose
model.safetensors header or config.json nests JSON 100,000 deep killed the interpreter (SIGSEGV;
30,000 was refused); a thread count beyond the machine was taken. Each runs in a child
interpreter, so that a crash fails the test instead of ending the whole run, and must end in one
clear exception."""

import os
import shutil
import struct
import subprocess
import sys

import qkv

DEEP = 100_000


def run_python(code, env=None):
    """Runs `code` in a child interpreter with this one's environment (PYTHONPATH finds the
    package as built); returns (exit status, stdout, stderr)."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **(env or {})})
    return r.returncode, r.stdout, r.stderr


# Prints the exception Model(path) raises as "TypeName: message"; the status says whether the
# interpreter lived to print it.
LOAD = """
import sys, qkv
try:
    qkv.Model(sys.argv[1] if len(sys.argv) > 1 else {path!r})
    print("loaded")
except Exception as e:
    print(type(e).__name__ + ": " + str(e))
"""


def loaded(out):
    """The exception the child printed, without its type: ValueError or RuntimeError, whichever
    the loader gives a broken file (both are qkv's one-line errors)."""
    kind, _, message = out.partition(": ")
    assert kind in ("ValueError", "RuntimeError"), out
    return message


def safetensors_with_header(path, header):
    text = header.encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)


def model_dir(tmp_path, name):
    """A copy of the installed MiniLM's small files, for one of them to be replaced."""
    source = qkv.Model().path
    d = tmp_path / name
    d.mkdir()
    for f in ("config.json", "vocab.txt"):
        shutil.copy(os.path.join(source, f), d / f)
    os.symlink(os.path.join(source, "model.safetensors"), d / "model.safetensors")
    return d


def test_a_deeply_nested_safetensors_header_is_a_value_error_not_a_crash(tmp_path):
    d = model_dir(tmp_path, "deep-weights")
    os.unlink(d / "model.safetensors")
    safetensors_with_header(d / "model.safetensors", "[" * DEEP + "]" * DEEP)
    status, out, err = run_python(LOAD.format(path=str(d)))
    assert status == 0, f"the interpreter died (status {status}): {err[-500:]}"
    assert loaded(out) == (f"{d}/model.safetensors: the header nests arrays and objects more "
                           "than 64 deep (at byte 64); expected at most 64 levels\n")


def test_a_deeply_nested_config_is_a_value_error_not_a_crash(tmp_path):
    d = model_dir(tmp_path, "deep-config")
    (d / "config.json").write_text('{"a":' * DEEP + "1" + "}" * DEEP)
    status, out, err = run_python(LOAD.format(path=str(d)))
    assert status == 0, f"the interpreter died (status {status}): {err[-500:]}"
    assert loaded(out) == (f"{d}/config.json: nests arrays and objects more than 64 deep "
                           "(at byte 320); expected at most 64 levels\n")


def test_a_thread_count_beyond_four_times_the_cores_is_a_value_error():
    cores = os.cpu_count()
    code = ("import numpy as np, qkv\n"
            "q = np.zeros((1, 4, 8), np.float32)\n"
            "try:\n"
            "    qkv.attention(q, q, q)\n"
            "    print('ran')\n"
            "except ValueError as e:\n"
            "    print(e)\n")
    status, out, err = run_python(code, {"QKV_NUM_THREADS": "4096"})
    assert status == 0, err[-500:]
    noun = "core" if cores == 1 else "cores"
    assert out == (f"$QKV_NUM_THREADS: 4096 is more than {4 * cores}; expected 1 to {4 * cores} "
                   f"(4 × this machine's {cores} {noun})\n")
    status, out, err = run_python(code, {"QKV_NUM_THREADS": str(4 * cores)})
    assert (status, out) == (0, "ran\n"), err[-500:]
