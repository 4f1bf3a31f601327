"""The device every test uses: CLBT_DEVICE's (CTest sets portable:cpu)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # model.py
if os.environ.get("CLBT_TEST_WITHOUT_PYOPENCL"):  # as where it is not installed
    sys.modules["pyopencl"] = None
if os.environ.get("CLBT_TEST_TORCH") == "0":  # as where it is not installed, here
    # and in the interpreters tests start (they inherit PYTHONPATH)
    assert "torch" not in sys.modules, "torch was imported before conftest.py could hide it"
    HIDDEN = os.path.join(os.path.dirname(__file__), "without_torch")
    sys.path.insert(0, HIDDEN)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [HIDDEN] + [p for p in [os.environ.get("PYTHONPATH")] if p])

import clbt  # noqa: E402


@pytest.fixture(scope="session")
def device():
    with clbt.Device() as opened:
        yield opened


@pytest.fixture
def no_pyopencl(monkeypatch):
    """Runs a test as if PyOpenCL were not installed."""
    monkeypatch.setattr(clbt._opencl, "pyopencl", None)
