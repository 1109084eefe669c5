"""Shared by the tests of the Python module: where the repository is, and the independent float64
NumPy reference of attention (tests/golden/attend_numpy.py, written from the formulas; it shares
no code with qkv), imported from there rather than written twice."""

import importlib.util
import os
import threading
import time

import pytest

SOURCE_DIR = os.environ.get(
    "QKV_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


attend_numpy = _load("attend_numpy", os.path.join(SOURCE_DIR, "tests", "golden", "attend_numpy.py"))


@pytest.fixture
def golden_dir():
    return os.path.join(SOURCE_DIR, "tests", "golden")


def python_runs_during(call):
    """Whether other Python threads run while `call()` is in C++ (the GIL released): a second
    thread notes the time every 1,000 iterations of a loop; were the GIL held for the call, no
    note could fall inside it after the first switch interval (5 ms). Returns (notes in the
    first half of the call, the call's seconds); only the first half is looked at because the
    call's end is read once this thread has the GIL back, which the counter may keep for a
    switch interval."""
    stop = threading.Event()
    notes = []

    def counter():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 1000 == 0:
                notes.append(time.perf_counter())

    t = threading.Thread(target=counter)
    t.start()
    time.sleep(0.02)  # the counter is running
    begin = time.perf_counter()
    call()
    end = time.perf_counter()
    stop.set()
    t.join()
    during = [x for x in notes if begin + 0.01 < x < begin + (end - begin) / 2]
    return len(during), end - begin
