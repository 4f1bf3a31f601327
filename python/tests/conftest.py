"""The device every test uses: CLBT_DEVICE's (CTest sets portable:cpu)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # model.py
if os.environ.get("CLBT_TEST_WITHOUT_PYOPENCL"):  # as where it is not installed
    sys.modules["pyopencl"] = None
if os.environ.get("CLBT_TEST_TORCH") == "0":  # as where it is not installed
    sys.modules["torch"] = None

import clbt  # noqa: E402


@pytest.fixture(scope="session")
def device():
    with clbt.Device() as opened:
        yield opened


@pytest.fixture
def no_pyopencl(monkeypatch):
    """Runs a test as if PyOpenCL were not installed."""
    monkeypatch.setattr(clbt._opencl, "pyopencl", None)
