"""The exception classes: every status of clbt.h's CLBT_STATUS_MAP (read
from the header here, not from the package) maps to one clbt.Error
subclass that is also the built-in exception a Python caller catches."""
import os
import pickle
import re

import pytest

import clbt

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                      "clbt", "clbt.h")


def header_statuses():
    """(name, value) of every XX(name, value, text) row of CLBT_STATUS_MAP."""
    with open(HEADER) as header:
        text = header.read()
    table = text[text.index("#define CLBT_STATUS_MAP(XX)"):text.index("typedef enum clbt_status")]
    return [("CLBT_" + name, int(value))
            for name, value in re.findall(r"XX\((\w+),\s*(-?\d+),", table)]


# By hand, from what each status says (clbt.h): which built-in a Python
# caller would catch for it.
BUILTIN = {"CLBT_NULL_ARGUMENT": ValueError, "CLBT_INVALID_ARGUMENT": ValueError,
           "CLBT_INVALID_CONFIG": ValueError, "CLBT_SIZE_OVERFLOW": ValueError,
           "CLBT_ROW_OUT_OF_RANGE": IndexError, "CLBT_ROW_OVERFLOW": ValueError,
           "CLBT_INVALID_BLOCK_ID": ValueError, "CLBT_TOO_MANY_REQUESTS": ValueError,
           "CLBT_TOO_MANY_TOKENS": ValueError, "CLBT_BUFFER_TOO_SMALL": ValueError,
           "CLBT_CONTEXT_MISMATCH": ValueError, "CLBT_INVALID_SELECTOR": ValueError,
           "CLBT_NO_MATCHING_DEVICE": RuntimeError, "CLBT_UNSUPPORTED_DEVICE": RuntimeError,
           "CLBT_READ_ONLY_BUFFER": ValueError,
           "CLBT_CL_OUT_OF_HOST_MEMORY": MemoryError,
           "CLBT_CL_MEM_OBJECT_ALLOCATION_FAILURE": MemoryError}


def test_every_status_maps_to_one_subclass_and_builtin():
    statuses = [s for s in header_statuses() if s[0] != "CLBT_SUCCESS"]
    assert len(statuses) > 70  # the header's table was found
    for name, value in statuses:
        error = clbt.Error(value, "m")
        assert type(error) is not clbt.Error, name
        assert isinstance(error, clbt.Error) and error.status == name and error.code == value
        expected = BUILTIN.get(name, RuntimeError)  # the other OpenCL codes: the driver failed
        assert isinstance(error, expected), (name, type(error).__mro__)
        others = {ValueError, IndexError, MemoryError, RuntimeError, TypeError} - {expected}
        assert not any(isinstance(error, other) for other in others), name


def test_classes_are_public_with_their_builtins():
    assert issubclass(clbt.InvalidArgumentError, ValueError)
    assert issubclass(clbt.OutOfRangeError, IndexError)
    assert issubclass(clbt.TypeMismatchError, TypeError)
    assert issubclass(clbt.OutOfMemoryError, MemoryError)
    assert issubclass(clbt.DeviceError, RuntimeError)
    assert repr(clbt.OutOfRangeError).endswith("'clbt.OutOfRangeError'>")


def test_errors_raised_by_calls_are_caught_as_builtins(device):
    with clbt.Table(device, block_size=16, max_num_reqs=4, max_num_blocks_per_req=4,
                    max_num_batched_tokens=8) as table:
        with pytest.raises(IndexError) as raised:
            table.append_row(4, [1])
        assert isinstance(raised.value, clbt.OutOfRangeError)
        assert raised.value.message == "row 4 is out of range: max_num_reqs is 4"
        with pytest.raises(ValueError, match="CLBT_ROW_OVERFLOW"):
            table.append_row(0, [1, 2, 3, 4, 5])
    with pytest.raises(RuntimeError, match="CLBT_NO_MATCHING_DEVICE"):
        clbt.Device("no such platform")
    with pytest.raises(ValueError, match="CLBT_INVALID_SELECTOR"):
        clbt.Device("a:cpu:0:1")


def test_an_error_pickles_and_an_unknown_status_is_the_base_class():
    error = pickle.loads(pickle.dumps(clbt.Error(-4005, "row 9")))
    assert type(error) is clbt.OutOfRangeError and (error.code, error.message) == (-4005, "row 9")
    assert str(error) == "CLBT_ROW_OUT_OF_RANGE (-4005): row 9"
    unknown = clbt.Error(-4999, "?")
    assert type(unknown) is clbt.Error and unknown.status == "CLBT_UNKNOWN_STATUS"


def test_the_statuses_the_package_raises_are_the_headers():
    # clbt._errors keeps the values of the statuses the package raises
    # itself (every module takes them from there): each must be the header's.
    from clbt import _errors
    header = dict(header_statuses())
    names = [n for n in vars(_errors) if n.isupper() and "CLBT_" + n in header]
    assert len(names) == 10
    for name in names:
        assert getattr(_errors, name) == header["CLBT_" + name], name
