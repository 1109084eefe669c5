"""Shared by the tests of the Python module: where the repository is, and the independent float64
NumPy reference of attention (tests/golden/attend_numpy.py, written from the formulas; it shares
no code with qkv), imported from there rather than written twice."""

import importlib.util
import os

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
