"""Device buffers shaped as the torch tensors vLLM's code calls on them.

A DeviceArray is a view (shape, strides, offset) of one OpenCL buffer, as
vLLM's ``.gpu`` tensors are views of CUDA memory: indexing and slicing give
views of the same buffer, ``fill_`` and ``copy_`` write it, and ``cpu()``,
``numpy()``, ``tolist()`` and ``item()`` read it. What ``cpu()`` returns
is the caller's choice (set_host_arrays, or CLBT_HOST_ARRAYS): a torch
tensor or a numpy array; by default ("auto") a torch tensor when torch is
installed, else a numpy array.
A StackedDeviceArray stands for a ``[G, ...]`` tensor over G such views of
equal shape (one per KV-cache group, each group's buffer its own).

How reads and writes meet the device (docs/python.md, "Device arrays"):

- Every read and write first runs the owner's pending work (the facade
  defers row updates, commits and gathers to the call that needs them),
  then waits for the queue to reach it: a read returns what the device holds
  after every command enqueued before it.
- ``numpy()`` and ``cpu()`` read into a new array: a snapshot, as torch's
  ``.cpu()`` of a device tensor is, which later device work leaves as it
  was (a view of a mapped buffer would change under later kernels, whose
  writes to a mapped buffer OpenCL leaves undefined), and whose writes
  stay on the host.
- Writes go through the queue, in order with clbt's commands: ``fill_`` is
  one enqueued fill (non-blocking), ``copy_`` and item assignment a
  blocking write of the view's bytes (a view with gaps is read, patched and
  written back).

torch functions and operators take DeviceArrays too (``torch.equal(a,
t)``, ``a == 0``): they see a host copy. Only ``DeviceArray.empty`` and
``DeviceArray.from_host`` allocate device memory (an array of the
caller's, in a buffer of its own): ``clone()``, ``contiguous()`` of a view
with gaps and ``to()`` give host tensors.
"""
import collections
import ctypes
import math
import operator
import os
import sys
import weakref
from ctypes import POINTER, byref, c_int32, c_size_t, c_uint, c_void_p

import numpy as np

from . import _opencl
from ._errors import INVALID_ARGUMENT, Error, InvalidArgumentError, TypeMismatchError
from ._opencl import describe

_cl = ctypes.CDLL("libOpenCL.so.1")  # own function objects: their own argtypes
_cl.clEnqueueFillBuffer.argtypes = (c_void_p, c_void_p, c_void_p, c_size_t, c_size_t, c_size_t,
                                    c_uint, c_void_p, POINTER(c_void_p))
for _name in ("clEnqueueReadBuffer", "clEnqueueWriteBuffer"):
    getattr(_cl, _name).argtypes = (c_void_p, c_void_p, c_uint, c_size_t, c_size_t, c_void_p,
                                    c_uint, c_void_p, POINTER(c_void_p))
_cl.clEnqueueCopyBuffer.argtypes = (c_void_p, c_void_p, c_void_p, c_size_t, c_size_t, c_size_t,
                                    c_uint, c_void_p, POINTER(c_void_p))
_cl.clGetEventInfo.argtypes = (c_void_p, c_uint, c_size_t, c_void_p, POINTER(c_size_t))
for _name in ("clRetainMemObject", "clReleaseMemObject", "clRetainCommandQueue",
              "clReleaseCommandQueue", "clReleaseEvent"):
    getattr(_cl, _name).argtypes = (c_void_p,)

_CL_EVENT_COMMAND_EXECUTION_STATUS = 0x11D3
_CL_TRUE = 1

_HOST_ARRAY_KINDS = ("auto", "numpy", "torch")
_HOST_ARRAYS_VARIABLE = "CLBT_HOST_ARRAYS"
_host_arrays = []  # [the setting], from CLBT_HOST_ARRAYS at first use
_host_torch = []  # [torch or None]: what _torch() gives under the setting


def _import_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _resolve(kind, source):
    """torch or None for a host-array kind; raises for a kind that is not
    one, or for "torch" where torch does not import."""
    if kind not in _HOST_ARRAY_KINDS:
        raise InvalidArgumentError(INVALID_ARGUMENT, "%s is %r; 'auto', 'numpy' or "
                                   "'torch' expected" % (source, kind))
    torch = None if kind == "numpy" else _import_torch()
    if torch is None and kind == "torch":
        raise ImportError("clbt: %s is 'torch', and torch does not import" % source)
    return torch


def _torch():
    """torch when host arrays are torch tensors, else None. The setting is
    set_host_arrays's, else CLBT_HOST_ARRAYS's, else "auto": torch when it
    is installed (imported once, when first needed: importing it takes a
    second or two)."""
    if not _host_torch:
        if not _host_arrays:
            _host_arrays.append(os.environ.get(_HOST_ARRAYS_VARIABLE) or "auto")
        _host_torch.append(_resolve(_host_arrays[0], _HOST_ARRAYS_VARIABLE))
    return _host_torch[0]


def _torch_if_imported():
    """torch when the process has imported it (a torch tensor the caller
    passes means it has), else None: what recognises torch tensors among
    a caller's values, whatever the host arrays are."""
    return sys.modules.get("torch")


def set_host_arrays(kind):
    """Sets what DeviceArray.cpu(), clone() and the facade's host views
    (get_cpu_tensor(), block_table.cpu) return, for the whole process:
    "torch" (torch tensors; ImportError where torch does not import),
    "numpy" (numpy arrays; torch is never imported for them) or "auto"
    (torch tensors when torch is installed, else numpy arrays: the
    default). It overrides CLBT_HOST_ARRAYS, which sets the same before the
    first call. Returns the setting it replaced."""
    torch = _resolve(kind, "set_host_arrays' kind")
    previous = _host_arrays[0] if _host_arrays else \
        os.environ.get(_HOST_ARRAYS_VARIABLE) or "auto"
    _host_arrays[:] = [kind]
    _host_torch[:] = [torch]
    return previous


def host_arrays():
    """What cpu() gives now: "torch" or "numpy"."""
    return "numpy" if _torch() is None else "torch"


def _check(code, call):
    if code:
        raise Error(code, "%s failed" % call)


# Commands whose event has not ended, of every array in the process: an
# event is released only once its command has ended, because PoCL aborts
# when a failure reaches a command whose event was released while it was
# queued (issue 20). Threads share it (issue 27): each event is taken out
# by one popleft, which is atomic, polled by the one caller that took it,
# and then released or put back; so no event is polled after its release
# or released twice, whichever threads call at once.
_in_flight = collections.deque()


def _keep(event):
    """Holds a command's event until the command ends; frees the ended."""
    _in_flight.append(event)
    status = c_int32()
    for _ in range(len(_in_flight)):
        try:
            held = _in_flight.popleft()
        except IndexError:  # another thread took the rest
            return
        code = _cl.clGetEventInfo(held, _CL_EVENT_COMMAND_EXECUTION_STATUS,
                                  ctypes.sizeof(status), byref(status), None)
        if code == 0 and status.value > 0:  # queued, submitted or running
            _in_flight.append(held)
        else:
            _cl.clReleaseEvent(held)


def copy_buffer(queue, source, source_offset, target, target_offset, nbytes):
    """Enqueues a device-side copy of nbytes between two buffers (byte
    offsets) on queue, in order with clbt's commands; not waited for."""
    event = c_void_p()
    _check(_cl.clEnqueueCopyBuffer(queue, source, target, source_offset, target_offset, nbytes,
                                   0, None, byref(event)), "clEnqueueCopyBuffer")
    _keep(event)


def fill_buffer(queue, target, offset, nbytes, value):
    """Enqueues a fill of nbytes of a buffer from a byte offset with value
    (a numpy scalar, whose size is the pattern's) on queue; not waited for."""
    event, pattern = c_void_p(), np.asarray(value)
    _check(_cl.clEnqueueFillBuffer(queue, target, pattern.ctypes.data, pattern.nbytes, offset,
                                   nbytes, 0, None, byref(event)), "clEnqueueFillBuffer")
    _keep(event)


def _release(mem, queue):
    _cl.clReleaseMemObject(mem)
    _cl.clReleaseCommandQueue(queue)


class Memory:
    """One OpenCL buffer DeviceArrays view, with a reference of its own on
    the buffer and on the queue (so arrays outlive the table that made
    them), and the owner's sync: a callable run before every read or write
    (None: nothing to run)."""

    __slots__ = ("handle", "queue", "nbytes", "sync", "__weakref__")

    def __init__(self, handle, queue, nbytes, sync=None):
        _check(_cl.clRetainMemObject(handle), "clRetainMemObject")
        _check(_cl.clRetainCommandQueue(queue), "clRetainCommandQueue")
        self.handle, self.queue, self.nbytes = handle, queue, nbytes
        self.sync = sync
        weakref.finalize(self, _release, handle, queue)

    def ready(self):
        if self.sync is not None:
            self.sync()


def _index(value, length, axis):
    """An integer index in [0, length), as numpy and torch take one."""
    try:
        i = operator.index(value)
    except TypeError:
        raise TypeError("index %r along axis %d is not an integer" % (value, axis)) from None
    if not -length <= i < length:
        raise IndexError("index %d is out of bounds for axis %d with size %d" % (i, axis, length))
    return i + length if i < 0 else i


def _basic(key):
    """Whether key is basic indexing (ints, slices, Ellipsis, None), which
    gives a view; anything else (arrays, lists, booleans) copies."""
    for part in key:
        if part is None or part is Ellipsis or isinstance(part, slice):
            continue
        if isinstance(part, (bool, np.bool_)):
            return False
        try:
            operator.index(part)
        except TypeError:
            return False
        if hasattr(part, "ndim") and part.ndim:
            return False
    return True


def _expand(key, ndim):
    """key as a tuple with Ellipsis replaced by full slices."""
    key = key if isinstance(key, tuple) else (key,)
    if sum(part is Ellipsis for part in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    taken = sum(part is not None and part is not Ellipsis for part in key)
    if taken > ndim:
        raise IndexError("too many indices: the array is %d-dimensional, %d were indexed"
                         % (ndim, taken))
    if Ellipsis in key:
        at = key.index(Ellipsis)
        return key[:at] + (slice(None),) * (ndim - taken) + key[at + 1:]
    return key + (slice(None),) * (ndim - taken)


class _HostForms:
    """What DeviceArray and StackedDeviceArray share: the host forms of
    their contents and everything computed from them."""

    __array_priority__ = 1000  # numpy's operators defer to ours

    def cpu(self):
        """The contents on the host as set_host_arrays says (by default a
        torch tensor, a numpy array without torch): numpy()'s snapshot,
        shared with no copy."""
        host = self.numpy()
        torch = _torch()
        return host if torch is None else torch.from_numpy(host)

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        host = self.numpy()
        if host.size != 1:
            raise ValueError("item() needs an array of one element; this one has %d"
                             % host.size)
        return host.reshape(()).item()

    def __array__(self, dtype=None, copy=None):
        host = self.numpy()
        return host if dtype is None else host.astype(dtype)

    def __int__(self):
        return int(self.item())

    def __index__(self):
        return operator.index(self.item())

    def __float__(self):
        return float(self.item())

    def __bool__(self):
        return bool(self.item())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    def size(self, dim=None):
        """The shape, or its length along dim (torch's size())."""
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def clone(self):
        """A host copy, as cpu() gives it: clbt allocates no device memory
        for a copy."""
        host = self.numpy()  # a new array already
        torch = _torch()
        return host if torch is None else torch.from_numpy(host)

    def to(self, *args, **kwargs):
        """The host tensor converted as torch's to() converts it."""
        return self.cpu().to(*args, **kwargs)

    def zero_(self):
        return self.fill_(0)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        torch = _torch_if_imported()  # torch calls this: the host copies are its tensors
        return func(*_to_host(args, torch), **_to_host(kwargs or {}, torch))

    def _host_operand(self):
        torch = _torch()
        return self.cpu() if torch is not None else self.numpy()

    def __repr__(self):
        return "%s(%s, dtype=%s)" % (type(self).__name__, np.array2string(self.numpy()),
                                     self.np_dtype)

    __hash__ = object.__hash__


def _host_binary(name):
    def method(self, other):
        other = _to_host(other)
        torch = _torch()
        if torch is not None and isinstance(other, np.ndarray):
            other = torch.as_tensor(other)  # torch's operators take no numpy arrays
        elif torch is None and _is_torch_tensor(other):
            other = other.numpy()  # nor numpy's torch tensors
        return getattr(self._host_operand(), name)(other)
    method.__name__ = name
    return method


for _op in ("eq", "ne", "lt", "le", "gt", "ge", "add", "radd", "sub", "rsub", "mul", "rmul",
            "floordiv", "rfloordiv", "truediv", "rtruediv", "mod", "rmod", "and", "or", "xor"):
    setattr(_HostForms, "__%s__" % _op, _host_binary("__%s__" % _op))
_HostForms.__neg__ = lambda self: -self._host_operand()


def _to_host(value, torch=None):
    """DeviceArrays within value (nested in lists, tuples, dicts) as host
    arrays: the setting's (cpu()), or torch tensors when torch is given."""
    if isinstance(value, _HostForms):
        return torch.from_numpy(value.numpy()) if torch else value._host_operand()
    if isinstance(value, (list, tuple)):
        return type(value)(_to_host(v, torch) for v in value)
    if isinstance(value, dict):
        return {k: _to_host(v, torch) for k, v in value.items()}
    return value


def _is_torch_tensor(value):
    torch = _torch_if_imported()
    return torch is not None and isinstance(value, torch.Tensor)


class DeviceArray(_HostForms):
    """A view of an OpenCL buffer: ``shape``, ``dtype`` (torch's when host
    arrays are torch tensors; ``np_dtype`` is numpy's), strides and a byte
    offset."""

    __slots__ = ("_memory", "shape", "np_dtype", "_strides", "_offset")

    def __init__(self, memory, shape, dtype, strides=None, offset=0):
        self._memory = memory
        self.shape = tuple(int(n) for n in shape)
        self.np_dtype = np.dtype(dtype)
        if strides is None:
            strides, step = [], self.np_dtype.itemsize
            for n in reversed(self.shape):
                strides.insert(0, step)
                step *= max(n, 1)
        self._strides = tuple(strides)
        self._offset = offset

    @classmethod
    def empty(cls, device, shape, dtype):
        """A new array of shape and numpy dtype in a buffer of its own on a
        clbt.Device (its context, and its queue for reads and writes); its
        contents are undefined. With from_host, the one way the package
        allocates device memory for an array."""
        from ._core import Device  # _core does not import this module: no cycle
        if not isinstance(device, Device):
            raise TypeMismatchError(INVALID_ARGUMENT, "device is %s; a clbt.Device "
                                    "expected" % describe(device))
        dtype = np.dtype(dtype)
        try:
            shape = tuple(operator.index(n) for n in shape)
        except TypeError:
            raise TypeMismatchError(INVALID_ARGUMENT, "shape is %s; a sequence of ints "
                                    "expected" % describe(shape)) from None
        if any(n < 0 for n in shape):
            raise InvalidArgumentError(INVALID_ARGUMENT, "shape %s has a size below 0"
                                       % (shape,))
        # Python's ints, not numpy's int64, whose product wraps: a shape of
        # 2**32 x 2**32 would get a buffer of 0 bytes under it.
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > sys.maxsize:
            raise InvalidArgumentError(INVALID_ARGUMENT, "shape %s of %s is %d bytes; at "
                                       "most %d expected" % (shape, dtype, nbytes,
                                                             sys.maxsize))
        queue, context = device.queue, device.context
        buffer = _opencl.create_buffer(context.int_ptr, max(nbytes, dtype.itemsize))
        memory = Memory(buffer.int_ptr, queue.int_ptr, nbytes)  # its own references
        buffer.close()
        return cls(memory, shape, dtype)

    @classmethod
    def from_host(cls, device, values):
        """A new array on a clbt.Device holding a copy of host values (a
        numpy array, or anything numpy.asarray reads: a torch CPU tensor
        of a numpy dtype), of their shape and dtype; the copy is a
        blocking write."""
        host = np.asarray(values.numpy() if _is_torch_tensor(values) else values)
        return cls.empty(device, host.shape, host.dtype).copy_(host)

    @property
    def dtype(self):
        torch = _torch()
        if torch is None:
            return self.np_dtype
        return {np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64}.get(
            self.np_dtype, self.np_dtype)

    def stride(self, dim=None):
        """Strides in elements, as torch's stride()."""
        strides = tuple(s // self.np_dtype.itemsize for s in self._strides)
        return strides if dim is None else strides[dim]

    def data_ptr(self):
        """The buffer's cl_mem handle plus the view's byte offset: the same
        for every view of one storage at one place (what a recorded graph
        checks), not an address to dereference."""
        return self._memory.handle + self._offset

    @property
    def cl_mem(self):
        """The OpenCL buffer's handle, as an integer (the view starts at
        byte offset ``cl_offset`` of it)."""
        return self._memory.handle

    @property
    def cl_offset(self):
        return self._offset

    def is_contiguous(self):
        step = self.np_dtype.itemsize
        for n, s in zip(reversed(self.shape), reversed(self._strides)):
            if n > 1 and s != step:
                return False
            step *= n
        return True

    def contiguous(self):
        return self if self.is_contiguous() else self.clone()

    def view(self, *shape):
        """The same elements in another shape (a contiguous array only): one
        size may be -1, inferred from the others."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if not self.is_contiguous():
            raise RuntimeError("view() needs a contiguous array")
        return DeviceArray(self._memory, _view_shape(tuple(shape), self.numel()),
                           self.np_dtype, None, self._offset)

    def _span(self):
        """The bytes [low, high) of the buffer the view touches."""
        low = high = self._offset
        for n, s in zip(self.shape, self._strides):
            if n == 0:
                return self._offset, self._offset
            if s < 0:
                low += (n - 1) * s
            else:
                high += (n - 1) * s
        return low, high + self.np_dtype.itemsize

    def numpy(self):
        """The contents read into a new C-contiguous numpy array (after the
        owner's pending work and every command enqueued before): a
        snapshot, which later device work does not change, and whose writes
        stay on the host."""
        memory = self._memory
        memory.ready()
        low, high = self._span()
        if high == low:
            return np.empty(self.shape, self.np_dtype)
        raw = np.empty(high - low, np.uint8)
        _check(_cl.clEnqueueReadBuffer(memory.queue, memory.handle, _CL_TRUE, low, high - low,
                                       raw.ctypes.data, 0, None, None), "clEnqueueReadBuffer")
        if self.is_contiguous():  # the span is the elements: no second copy
            return raw.view(self.np_dtype).reshape(self.shape)
        return np.lib.stride_tricks.as_strided(raw[self._offset - low:].view(self.np_dtype),
                                               self.shape, self._strides).copy()

    def __getitem__(self, key):
        """A view for basic indexing (ints, slices, ``...``, None), as torch
        gives; a host tensor for any other index."""
        parts = key if isinstance(key, tuple) else (key,)
        if not _basic(parts):
            return self.cpu()[_to_host(key)]
        shape, strides, offset, axis = [], [], self._offset, 0
        for part in _expand(key, len(self.shape)):
            if part is None:
                shape.append(1)
                strides.append(0)
                continue
            n, s = self.shape[axis], self._strides[axis]
            if isinstance(part, slice):
                start, stop, step = part.indices(n)
                shape.append(len(range(start, stop, step)))
                strides.append(s * step)
                offset += start * s
            else:
                offset += _index(part, n, axis) * s
            axis += 1
        return DeviceArray(self._memory, shape, self.np_dtype, strides, offset)

    def __setitem__(self, key, value):
        parts = key if isinstance(key, tuple) else (key,)
        if _basic(parts):
            self[key].copy_(value)
            return
        host = np.array(self.numpy())
        host[_numpy_key(key)] = _host_values(value, self.np_dtype)
        self.copy_(host)

    def fill_(self, value):
        """Sets every element to value: one enqueued fill when the view has
        no gaps; returns self."""
        memory = self._memory
        pattern = _host_values(value, self.np_dtype)
        if pattern.ndim:
            raise ValueError("fill_ takes one value; got shape %s" % (pattern.shape,))
        if not self.is_contiguous():
            return self.copy_(np.full(self.shape, pattern))
        memory.ready()
        low, high = self._span()
        if high > low:
            event = c_void_p()
            _check(_cl.clEnqueueFillBuffer(memory.queue, memory.handle, pattern.ctypes.data,
                                           pattern.nbytes, low, high - low, 0, None,
                                           byref(event)), "clEnqueueFillBuffer")
            _keep(event)
        return self

    def copy_(self, source, non_blocking=False):
        """Writes source (a DeviceArray, a torch tensor, a numpy array, a
        list or a scalar, broadcast to the view's shape) into the view;
        returns self. The write is blocking: source may change once it
        returns. non_blocking is accepted and changes nothing."""
        values = _host_values(source, self.np_dtype)
        try:
            values = np.broadcast_to(values, self.shape)
        except ValueError:
            raise ValueError("cannot copy an array of shape %s into one of shape %s" % (
                values.shape, self.shape)) from None
        memory = self._memory
        memory.ready()
        low, high = self._span()
        if high == low:
            return self
        if self.is_contiguous():
            raw = np.ascontiguousarray(values, self.np_dtype)
        else:  # read the span, patch the view's elements, write it back
            raw = np.empty(high - low, np.uint8)
            _check(_cl.clEnqueueReadBuffer(memory.queue, memory.handle, _CL_TRUE, low,
                                           high - low, raw.ctypes.data, 0, None, None),
                   "clEnqueueReadBuffer")
            patch = np.lib.stride_tricks.as_strided(raw[self._offset - low:].view(self.np_dtype),
                                                    self.shape, self._strides)
            patch[...] = values
        _check(_cl.clEnqueueWriteBuffer(memory.queue, memory.handle, _CL_TRUE, low, high - low,
                                        raw.ctypes.data, 0, None, None), "clEnqueueWriteBuffer")
        return self


class _ShapeError(InvalidArgumentError, RuntimeError):
    """A view shape refused: clbt's InvalidArgumentError, and the
    RuntimeError torch raises for one (code written for torch catches
    that)."""


def _view_shape(shape, numel):
    """view()'s shape with its -1 inferred, refused unless it holds numel
    elements: a negative size (other than one -1) or a float would
    otherwise multiply out right ((-2, -6) for 12) and make a view no read
    can take."""
    sizes = []
    for i, n in enumerate(shape):
        try:
            n = operator.index(n)
        except TypeError:
            raise TypeMismatchError(INVALID_ARGUMENT, "shape[%d] is %s; an int expected" % (
                i, describe(n))) from None
        if n < -1:
            raise _ShapeError(INVALID_ARGUMENT, "shape[%d] is %d; a size >= 0 (or one -1, "
                              "inferred)" % (i, n))
        sizes.append(n)
    if sizes.count(-1) > 1:
        raise _ShapeError(INVALID_ARGUMENT, "shape %s has %d sizes of -1; one can be "
                          "inferred" % (shape, sizes.count(-1)))
    known = 1
    for n in sizes:
        known *= n if n != -1 else 1
    inferred = -1 in sizes
    if (known != numel) if not inferred else (known == 0 or numel % known):
        raise _ShapeError(INVALID_ARGUMENT, "shape %s is invalid for %d elements" % (shape,
                                                                                   numel))
    if inferred:
        sizes[sizes.index(-1)] = numel // known
    return sizes


def _numpy_key(key):
    if _is_torch_tensor(key):
        return key.numpy()
    return _to_host(key)


def _host_values(source, dtype):
    """source as a numpy array of dtype, refusing values that do not fit."""
    if isinstance(source, _HostForms):
        source = source.numpy()
    if _is_torch_tensor(source):
        source = source.detach().cpu().numpy()
    values = np.asarray(source)
    if values.dtype == dtype:
        return values
    if values.dtype == object:  # Python ints beyond int64
        raise ValueError("values do not fit %s" % dtype)
    if values.size and values.dtype.kind not in "iub":
        raise TypeError("values of dtype %s cannot be written to a %s array" % (values.dtype,
                                                                               dtype))
    bounds = np.iinfo(dtype)
    if values.size and (values.min() < bounds.min or values.max() > bounds.max):
        raise ValueError("values do not fit %s: %s holds %d" % (
            dtype, "the source", values.min() if values.min() < bounds.min else values.max()))
    return values.astype(dtype)


class StackedDeviceArray(_HostForms):
    """A ``[G, ...]`` array over G DeviceArrays of one shape and dtype (one
    per KV-cache group, each in its group's own buffer), indexed as one:
    ``stack[g]`` is group g's array, ``stack[:, :n]`` a stack of views."""

    __slots__ = ("members",)

    def __init__(self, members):
        self.members = list(members)
        if not self.members:
            raise ValueError("a stack needs at least one array")

    @property
    def shape(self):
        return (len(self.members),) + self.members[0].shape

    @property
    def dtype(self):
        return self.members[0].dtype

    @property
    def np_dtype(self):
        return self.members[0].np_dtype

    def data_ptr(self):
        """Group 0's view's data_ptr: the same at every call for one
        persistent stack."""
        return self.members[0].data_ptr()

    def numpy(self):
        """The members' contents stacked into a new array."""
        return np.stack([member.numpy() for member in self.members])

    def __getitem__(self, key):
        parts = key if isinstance(key, tuple) else (key,)
        if not _basic(parts) or None in parts:
            return self.cpu()[_to_host(key)]
        first, rest = _expand(key, len(self.shape))[0], _expand(key, len(self.shape))[1:]
        if isinstance(first, slice):
            members = self.members[first]
            if not members:
                return self.cpu()[_to_host(key)]
            return StackedDeviceArray(member[rest] for member in members)
        return self.members[_index(first, len(self.members), 0)][rest]

    def __setitem__(self, key, value):
        view = self[key]
        if not isinstance(view, _HostForms):
            raise TypeError("assignment through an index that copies is not supported")
        view.copy_(value)

    def fill_(self, value):
        for member in self.members:
            member.fill_(value)
        return self

    def copy_(self, source, non_blocking=False):
        values = np.broadcast_to(_host_values(source, self.np_dtype), self.shape)
        for member, part in zip(self.members, values):
            member.copy_(part)
        return self
