"""Arguments checked before C sees them.

ctypes passes what it is given: an int past a C type's range wraps, and an
address goes wherever it points, so C would read past an array that is
shorter than a count says. Every value the package hands to C goes
through one of these first: integers against their C type's range, host
arrays for type, dimension and dtype (then copied into a contiguous C
array of the C type), device arrays for their OpenCL type, dtype, shape
and contiguity, and the caller's lengths against the counts C reads.
"""
import array
import ctypes
import operator
from itertools import chain

import numpy as np

from . import _opencl
from ._errors import (INVALID_ARGUMENT, INVALID_BLOCK_ID, ROW_OUT_OF_RANGE, Error,
                      InvalidArgumentError, TypeMismatchError)

# The C types arrays hold, by array-module type code.
INT32, UINT32, INT64 = "i", "I", "q"
SIZE = next(c for c in "ILQ" if array.array(c).itemsize == ctypes.sizeof(ctypes.c_size_t))
DTYPES = {INT32: np.int32, UINT32: np.uint32, INT64: np.int64}
assert all(array.array(code).itemsize == np.dtype(t).itemsize for code, t in DTYPES.items())

_RANGES = {ctypes.c_uint32: (0, 2**32 - 1), ctypes.c_int: (-2**31, 2**31 - 1),
           ctypes.c_size_t: (0, 2**(8 * ctypes.sizeof(ctypes.c_size_t)) - 1)}
_ROW_NAMES = ("row", "src", "dst", "a", "b")


def _status(name):
    """The status of a value outside its C type: what C gives a row or a
    block id out of its bound, else CLBT_INVALID_ARGUMENT."""
    if name in _ROW_NAMES or name == "rows":
        return ROW_OUT_OF_RANGE
    return INVALID_BLOCK_ID if name.startswith("block_ids") else INVALID_ARGUMENT


def integer(value, name, ctype=ctypes.c_uint32):
    """value as the C type takes it: an int (or anything with __index__,
    not a float) in the type's range; never wrapped."""
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; an int expected" % (
            name, _opencl.describe(value))) from None
    low, high = _RANGES[ctype]
    if not low <= value <= high:
        raise Error(_status(name), "%s %d is outside [%d, %d]" % (name, value, low, high))
    return value


def u32(value, name):
    if type(value) is int and 0 <= value <= 0xFFFFFFFF:  # the common case, quickly
        return value
    return integer(value, name, ctypes.c_uint32)


_SIZE_MAX = _RANGES[ctypes.c_size_t][1]


def size(value, name):
    if type(value) is int and 0 <= value <= _SIZE_MAX:  # the common case, quickly
        return value
    return integer(value, name, ctypes.c_size_t)


def struct(kind, **fields):
    """A ctypes struct with every integer field checked against its type
    (ctypes would wrap it silently); pointer fields are set as given."""
    for name, value in fields.items():
        ctype = dict(kind._fields_)[name]
        if ctype in _RANGES:
            fields[name] = integer(value, name, ctype)
    return kind(**fields)


_SEQUENCES = (list, tuple, range)


def host_array(values, typecode, name):
    """(keep-alive, address, length) of a 1-D sequence of ints as a
    contiguous C array of the array-module type typecode. Lists, tuples and
    ranges go through the array module (the fast path for a step's few
    ids); anything else with __array__ (numpy, torch CPU tensors) through
    numpy, copied when its dtype or strides differ from C's. Refused: a
    scalar (an int is not a one-id list), a str, a 2-D array (nothing is
    flattened), a float or bool dtype, and values that do not fit the C
    type (never wrapped)."""
    if type(values) in _SEQUENCES:
        try:
            held = array.array(typecode, values)
        except TypeError as error:
            raise TypeMismatchError(INVALID_ARGUMENT, "%s: %s; a flat sequence of ints "
                                    "expected" % (name, error)) from None
        except OverflowError:  # named as convert names an array's value
            bounds = np.iinfo(DTYPES[typecode])
            outside = next(v for v in values if not bounds.min <= v <= bounds.max)
            raise Error(_status(name), "%s holds %d; %s takes [%d, %d]" % (
                name, outside, bounds.dtype.name, bounds.min, bounds.max)) from None
        address, count = held.buffer_info()
        return held, address, count
    if isinstance(values, (str, bytes)) or not hasattr(values, "__array__"):
        raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; a 1-D sequence of ints expected"
                                % (name, _opencl.describe(values)))
    held = np.asarray(values)
    if held.ndim != 1:
        raise TypeMismatchError(INVALID_ARGUMENT, "%s has shape %s; a 1-D array expected" % (
            name, held.shape))
    dtype = DTYPES[typecode]
    if held.dtype != dtype or not held.flags.c_contiguous:
        held = np.ascontiguousarray(convert(held, dtype, name))
    return held, held.ctypes.data, held.size


def convert(values, dtype, name):
    """values (a numpy array of any shape) as dtype, refused when not
    integers or out of its range."""
    if values.size == 0:  # nothing to misread, whatever its dtype
        return values.astype(dtype)
    if values.dtype.kind not in "iu":
        raise TypeMismatchError(INVALID_ARGUMENT, "%s has dtype %s; integers expected" % (
            name, values.dtype))
    bounds = np.iinfo(dtype)
    low, high = int(values.min()), int(values.max())
    if low < bounds.min or high > bounds.max:
        raise Error(_status(name), "%s holds %d; %s takes [%d, %d]" % (
            name, low if low < bounds.min else high, np.dtype(dtype).name, bounds.min,
            bounds.max))
    return values.astype(dtype)


# What a group's ids may be on group_ids' quick path: each is iterated.
_FLAT = (list, tuple, range, np.ndarray)


def group_ids(block_ids, counts, name="block_ids"):
    """One row update of every group in the layout of
    clbt_multi_table_update_row: block_ids (one sequence of ids per group)
    as one int32 array of every group's ids end to end, which it returns,
    and each group's count set in counts (a size_t array of one entry per
    group). A decode step's lists of Python ints are copied by the array
    module at once (one group, the common case, with no chain between);
    anything else, and anything refused, goes through host_array group by
    group, which names the group and what is wrong with it."""
    num_groups = len(counts)
    if (type(block_ids) is tuple or type(block_ids) is list) and len(block_ids) == num_groups:
        try:
            if num_groups == 1:
                if type(block_ids[0]) in _FLAT:
                    ids = array.array(INT32, block_ids[0])
                    counts[0] = len(ids)
                    return ids
            elif all(type(ids) in _FLAT for ids in block_ids):
                ids = array.array(INT32, chain.from_iterable(block_ids))
                counts[:] = array.array(SIZE, map(len, block_ids))
                return ids
        except (TypeError, OverflowError):
            pass  # named below
    groups = sequence(block_ids, name)
    if len(groups) != num_groups:
        raise InvalidArgumentError(INVALID_ARGUMENT, "%s has %d entries; the table has %d "
                                   "groups" % (name, len(groups), num_groups))
    held = [host_array(ids, INT32, "%s[%d]" % (name, g)) for g, ids in enumerate(groups)]
    counts[:] = array.array(SIZE, [h[2] for h in held])
    return array.array(INT32, chain.from_iterable(h[0] for h in held))


def sequence(values, name):
    """A list of a sequence's items (one per group): a list, tuple or 1-D
    array of per-group things; a scalar or str is refused."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") \
            or getattr(values, "ndim", 1) == 0:
        raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; a sequence with one entry per "
                                "group expected" % (name, _opencl.describe(values)))
    return list(values)


def at_least(name, count, needed, why, status=INVALID_ARGUMENT):
    """Refuses an array shorter than what C will read from it."""
    if count < needed:
        raise Error(status, "%s holds %d values; %s needs %d" % (name, count, why, needed))


def is_device_array(obj):
    """Whether obj is an OpenCL buffer or array (PyOpenCL's or clbt's),
    rather than host values; a bare int counts as one, to be refused."""
    if isinstance(obj, (int, _opencl.Buffer)):
        return True
    pyopencl = _opencl.pyopencl
    return pyopencl is not None and isinstance(obj, (pyopencl.Buffer, pyopencl.array.Array))


def device_array(obj, dtype, name):
    """(int handle, the elements it holds) of a device input: a
    pyopencl.array.Array of dtype, 1-D, contiguous and at its buffer's
    start, or a buffer (pyopencl.Buffer, clbt.Buffer), whose bytes are
    counted in elements of dtype. C then checks the buffer's size against
    the counts as well."""
    itemsize = np.dtype(dtype).itemsize
    pyopencl = _opencl.pyopencl
    if pyopencl is not None and isinstance(obj, pyopencl.array.Array):
        if obj.dtype != dtype:
            raise TypeMismatchError(INVALID_ARGUMENT, "%s has dtype %s; %s expected" % (
                name, obj.dtype, np.dtype(dtype).name))
        if obj.ndim != 1:
            raise TypeMismatchError(INVALID_ARGUMENT, "%s has shape %s; a 1-D array expected"
                                    % (name, obj.shape))
        if not obj.flags.c_contiguous:
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s is not contiguous (strides %s)" % (
                name, obj.strides))
        if obj.offset:
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s starts %d bytes into its buffer; "
                                       "pass an array at its buffer's start" % (name, obj.offset))
        return obj.base_data.int_ptr, obj.size
    if isinstance(obj, int):
        raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; host values or a device array "
                                "(pyopencl.array.Array, pyopencl.Buffer, clbt.Buffer) expected; "
                                "wrap a raw cl_mem in clbt.Buffer.from_int_ptr" % (
                                    name, _opencl.describe(obj)))
    buffer = _opencl.handle(obj, "buffer", name)
    return buffer, obj.size // itemsize
