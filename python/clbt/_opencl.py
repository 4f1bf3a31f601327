"""The few OpenCL calls the package makes itself (through ctypes, on the
OpenCL loader clbt links), the package's own OpenCL object types, and the
bridge to PyOpenCL when it is installed.

With PyOpenCL, clbt's buffers come back as pyopencl.Buffer and
pyopencl.array.Array views of the same memory (no copy), its events as
pyopencl.Event, its queue and context as PyOpenCL's. Without it they come
back as this module's Buffer, Event, CommandQueue and Context: each holds
one reference to its OpenCL object, released when it is closed or
collected.

Wherever clbt takes an OpenCL object it takes either kind, never a bare
int: an int that is not a live object of the right kind makes the driver
read through a wild pointer, and nothing can tell it from a good one
before that. A raw handle from elsewhere is wrapped first, by
``clbt.Buffer.from_int_ptr(handle)`` (and Event's, CommandQueue's,
Context's): that call is the caller's promise that the int is such an
object; it checks what the driver can check (the object's kind) and takes
a reference of its own.
"""
from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, byref, c_int32, c_size_t, c_uint, c_uint32, c_uint64, c_void_p

from ._errors import INVALID_ARGUMENT, Error, TypeMismatchError

try:
    import pyopencl
    import pyopencl.array
except ImportError:  # the package's own types then stand in
    pyopencl = None

_cl = ctypes.CDLL("libOpenCL.so.1")


def _declare(restype, argtypes, *names):
    for name in names:
        function = getattr(_cl, name)
        function.restype, function.argtypes = restype, argtypes


_declare(c_int32, (c_uint, c_void_p, POINTER(c_uint)), "clGetPlatformIDs")
_declare(c_int32, (c_void_p, c_uint64, c_uint, c_void_p, POINTER(c_uint)), "clGetDeviceIDs")
_declare(c_void_p, (c_void_p, c_uint64, c_size_t, c_void_p, POINTER(c_int32)), "clCreateBuffer")
_declare(c_void_p, (c_void_p, c_uint64, c_uint, c_void_p, POINTER(c_int32)), "clCreateSubBuffer")
_declare(c_int32, (c_void_p, c_void_p, c_uint, c_size_t, c_size_t, c_void_p, c_uint, c_void_p,
                   c_void_p), "clEnqueueWriteBuffer", "clEnqueueReadBuffer")
_declare(c_int32, (c_void_p,), "clFinish", "clRetainMemObject", "clReleaseMemObject",
         "clRetainEvent", "clReleaseEvent", "clRetainCommandQueue", "clReleaseCommandQueue",
         "clRetainContext", "clReleaseContext")
_declare(c_int32, (c_uint, c_void_p), "clWaitForEvents")
_declare(c_int32, (c_void_p, c_uint, c_size_t, c_void_p, POINTER(c_size_t)),
         "clGetMemObjectInfo", "clGetEventInfo", "clGetCommandQueueInfo", "clGetContextInfo",
         "clGetDeviceInfo")

CL_MEM_READ_WRITE = 1 << 0
CL_MEM_READ_ONLY = 1 << 2
CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
CL_DEVICE_MEM_BASE_ADDR_ALIGN = 0x1019
CL_CONTEXT_NUM_DEVICES = 0x1083
CL_QUEUE_CONTEXT, CL_QUEUE_DEVICE = 0x1090, 0x1091
CL_MEM_TYPE, CL_MEM_SIZE, CL_MEM_OBJECT_BUFFER = 0x1100, 0x1102, 0x10F0
CL_EVENT_COMMAND_EXECUTION_STATUS = 0x11D3
CL_BUFFER_CREATE_TYPE_REGION = 0x1220
CL_COMPLETE = 0
CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST = -14


def check(code, call):
    """Raises the clbt.Error of a failed OpenCL call's status."""
    if code:
        raise Error(code, "%s failed" % call)


def _info(function, handle, name, ctype):
    value = ctype()
    check(function(handle, name, ctypes.sizeof(value), byref(value), None), function.__name__)
    return value.value


_closing = threading.Lock()  # makes taking a handle to release one step


class _Object:
    """One reference to an OpenCL object of the kind the subclass names:
    ``int_ptr`` is its handle; close() (or collection) releases it."""
    _kind = "OpenCL object"
    _retain = _release = _probe = None  # OpenCL functions; _probe: (info call, name, ctype)
    _int_ptr = None

    def __init__(self, int_ptr: int, *, retain: bool):
        """Takes int_ptr over (retain=False) or a new reference to it."""
        if retain:
            check(type(self)._retain(int_ptr), type(self)._retain.__name__)
        self._int_ptr = int_ptr

    @classmethod
    def from_int_ptr(cls, int_ptr: int, retain: bool = True):
        """Wraps a raw handle (taking a reference of its own unless retain
        is False). The caller promises int_ptr is a live object of this
        kind; the driver's answer to an info query on it is checked."""
        if type(int_ptr) is not int or not 0 < int_ptr < 1 << 64:
            raise TypeMismatchError(INVALID_ARGUMENT, "%s.from_int_ptr takes a %s handle (a "
                                    "nonzero int); got %r" % (cls.__name__, cls._kind, int_ptr))
        function, name, ctype = cls._probe
        value = ctype()
        code = function(int_ptr, name, ctypes.sizeof(value), byref(value), None)
        if code or not cls._accepts(value.value):
            raise TypeMismatchError(INVALID_ARGUMENT, "%#x is not a %s (%s answers %d)" % (
                int_ptr, cls._kind, function.__name__, code))
        return cls(int_ptr, retain=retain)

    @staticmethod
    def _accepts(probed):
        return True

    @property
    def int_ptr(self) -> int:
        if self._int_ptr is None:
            raise Error(-4001, "the %s is released" % type(self).__name__)
        return self._int_ptr

    @property
    def open(self) -> bool:
        """False once this reference is released."""
        return self._int_ptr is not None

    def close(self) -> None:
        """Releases this reference now; twice is fine, from two threads at
        once too (the handle is taken under a lock: one of them releases)."""
        with _closing:
            int_ptr, self._int_ptr = self._int_ptr, None
        if int_ptr is not None:
            type(self)._release(int_ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def __del__(self):
        self.close()

    def __repr__(self):
        if self._int_ptr is None:
            return "<clbt.%s released>" % type(self).__name__
        return "<clbt.%s %#x>" % (type(self).__name__, self._int_ptr)


class Buffer(_Object):
    """A cl_mem buffer: what clbt hands out without PyOpenCL, and what a
    raw cl_mem must be wrapped in to be passed (Buffer.from_int_ptr)."""
    _kind = "cl_mem buffer"
    _retain, _release = _cl.clRetainMemObject, _cl.clReleaseMemObject
    _probe = (_cl.clGetMemObjectInfo, CL_MEM_TYPE, c_uint32)

    @staticmethod
    def _accepts(probed):
        return probed == CL_MEM_OBJECT_BUFFER

    @property
    def size(self) -> int:
        """The buffer's size in bytes."""
        return _info(_cl.clGetMemObjectInfo, self.int_ptr, CL_MEM_SIZE, c_size_t)


class Event(_Object):
    """A cl_event: what event=True returns without PyOpenCL."""
    _kind = "cl_event"
    _retain, _release = _cl.clRetainEvent, _cl.clReleaseEvent
    _probe = (_cl.clGetEventInfo, CL_EVENT_COMMAND_EXECUTION_STATUS, c_int32)

    @property
    def command_execution_status(self) -> int:
        """CL_COMPLETE (0) once its command ended, negative if it failed."""
        return _info(_cl.clGetEventInfo, self.int_ptr, CL_EVENT_COMMAND_EXECUTION_STATUS,
                     c_int32)

    def wait(self) -> None:
        """Waits until the command ends; raises clbt.Error if it failed."""
        check(_cl.clWaitForEvents(1, byref(c_void_p(self.int_ptr))), "clWaitForEvents")


class CommandQueue(_Object):
    """A cl_command_queue: Device.queue without PyOpenCL, and what
    Device(queue=...) wraps (its context and device come with it)."""
    _kind = "cl_command_queue"
    _retain, _release = _cl.clRetainCommandQueue, _cl.clReleaseCommandQueue
    _probe = (_cl.clGetCommandQueueInfo, CL_QUEUE_CONTEXT, c_void_p)


class Context(_Object):
    """A cl_context: Device.context without PyOpenCL."""
    _kind = "cl_context"
    _retain, _release = _cl.clRetainContext, _cl.clReleaseContext
    _probe = (_cl.clGetContextInfo, CL_CONTEXT_NUM_DEVICES, c_uint)


def _accepted(kind):
    """The classes whose objects stand for an OpenCL object of a kind."""
    own = {"buffer": Buffer, "event": Event, "queue": CommandQueue, "context": Context}.get(kind)
    theirs = None if pyopencl is None else getattr(pyopencl, {
        "buffer": "Buffer", "event": "Event", "queue": "CommandQueue", "context": "Context",
        "device": "Device"}[kind])
    return tuple(t for t in (own, theirs) if t is not None)


def describe(obj):
    """'an int', 'a list': what a refused argument is."""
    name = type(obj).__name__
    return ("an " if name[0] in "aeiouAEIOU" else "a ") + name


def handle(obj, kind, name):
    """The int handle of obj, an OpenCL object of a kind ("buffer",
    "event", "queue", "context", "device") given as a PyOpenCL object or
    one of this module's; anything else (a bare int included) is refused
    with TypeMismatchError naming the argument."""
    accepted = _accepted(kind)
    if isinstance(obj, accepted):
        return obj.int_ptr
    if not accepted:  # a cl_device_id: only PyOpenCL has a type for one
        raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; without PyOpenCL leave it out "
                                "(the queue's is taken)" % (name, describe(obj)))
    names = " or ".join("%s.%s" % (t.__module__.split(".")[0], t.__name__)
                        for t in accepted)
    hint = ""
    if isinstance(obj, int) and accepted[:1] in ((Buffer,), (Event,), (CommandQueue,),
                                                 (Context,)):
        hint = " (wrap a raw handle in clbt.%s.from_int_ptr)" % accepted[0].__name__
    raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; a %s expected%s" % (
        name, describe(obj), names, hint))


def device_ids():
    """Every OpenCL device of every platform, as int handles."""
    count = c_uint()
    check(_cl.clGetPlatformIDs(0, None, byref(count)), "clGetPlatformIDs")
    platforms = (c_void_p * count.value)()
    check(_cl.clGetPlatformIDs(count, platforms, None), "clGetPlatformIDs")
    ids = []
    for platform in platforms:
        code = _cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, None, byref(count))
        if code == -1:  # CL_DEVICE_NOT_FOUND: a platform with no device
            continue
        check(code, "clGetDeviceIDs")
        devices = (c_void_p * count.value)()
        check(_cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, devices, None),
              "clGetDeviceIDs")
        ids.extend(devices)
    return ids


def queue_context_and_device(queue):
    """(context, device) int handles of a queue's int handle."""
    return (_info(_cl.clGetCommandQueueInfo, queue, CL_QUEUE_CONTEXT, c_void_p),
            _info(_cl.clGetCommandQueueInfo, queue, CL_QUEUE_DEVICE, c_void_p))


def base_address_alignment(queue):
    """The bytes a sub-buffer's origin must be a multiple of on a queue's
    device."""
    device = queue_context_and_device(queue)[1]
    return _info(_cl.clGetDeviceInfo, device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, c_uint) // 8


def create_buffer(context, size, read_only=False):
    """A new Buffer of size bytes in a context (int handle) that kernels may
    read and write, or only read (read_only: what clbt's kernels only read,
    such as an upload; clbt refuses one as a buffer it writes)."""
    error = c_int32()
    flags = CL_MEM_READ_ONLY if read_only else CL_MEM_READ_WRITE
    buffer = _cl.clCreateBuffer(context, flags, size, None, byref(error))
    check(error.value, "clCreateBuffer")
    return Buffer(buffer, retain=False)


def sub_buffer(buffer, origin, size):
    """A Buffer over bytes [origin, origin + size) of another, whose
    access it inherits."""
    region = (c_size_t * 2)(origin, size)
    error = c_int32()
    sub = _cl.clCreateSubBuffer(buffer.int_ptr, 0, CL_BUFFER_CREATE_TYPE_REGION,
                                region, byref(error))
    check(error.value, "clCreateSubBuffer")
    return Buffer(sub, retain=False)


def write(queue, buffer, address, size):
    """Enqueues a write of size bytes at address into an int buffer handle
    and returns without waiting, with the write's Event: it must be kept
    until the write ends (PoCL aborts the process when a command fails and
    nobody holds its event)."""
    event = c_void_p()
    check(_cl.clEnqueueWriteBuffer(queue, buffer, 0, 0, size, address, 0, None, byref(event)),
          "clEnqueueWriteBuffer")
    return Event(event.value, retain=False)


def ended(event):
    """Whether an Event's command ended (done or failed); never waits."""
    return event.command_execution_status <= CL_COMPLETE


def wait_until_ended(events):
    """Waits for Events' commands; a command that failed has ended too."""
    if events:
        array = (c_void_p * len(events))(*[e.int_ptr for e in events])
        code = _cl.clWaitForEvents(len(events), array)
        if code != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
            check(code, "clWaitForEvents")


def read(queue, buffer, array):
    """Reads an int buffer handle's first array.nbytes bytes into a numpy
    array; waits."""
    check(_cl.clEnqueueReadBuffer(queue, buffer, 1, 0, array.nbytes, array.ctypes.data,
                                  0, None, None), "clEnqueueReadBuffer")
    return array


def finish(queue):
    check(_cl.clFinish(queue), "clFinish")


def release_event(event: Event) -> None:
    """Releases an Event that event=True returned without PyOpenCL (the
    same as event.close())."""
    if not isinstance(event, Event):
        raise TypeMismatchError(INVALID_ARGUMENT, "release_event takes a clbt.Event; got %s"
                                % describe(event))
    event.close()


def wait_list(events):
    """(count, address, keep-alive) of a wait list of events."""
    if events is None:
        return 0, None, None
    if isinstance(events, (str, bytes)) or not hasattr(events, "__len__"):
        raise TypeMismatchError(INVALID_ARGUMENT, "wait_for is %s; a list of events "
                                "expected" % describe(events))
    if not len(events):
        return 0, None, None
    array = (c_void_p * len(events))(*[handle(e, "event", "wait_for[%d]" % i)
                                       for i, e in enumerate(events)])
    return len(events), ctypes.addressof(array), array


def event_object(event):
    """A new event handle as a pyopencl.Event or an Event that owns it."""
    if pyopencl is None:
        return Event(event, retain=False)
    return pyopencl.Event.from_int_ptr(event, retain=False)


def wrapped(kind, int_ptr):
    """A new reference to an OpenCL object of clbt's as PyOpenCL's or this
    module's type of its kind ("queue", "context")."""
    if pyopencl is None:
        return {"queue": CommandQueue, "context": Context}[kind](int_ptr, retain=True)
    return getattr(pyopencl, {"queue": "CommandQueue", "context": "Context"}[kind]).from_int_ptr(
        int_ptr, retain=True)


def buffer_object(buffer, queue, shape=None, dtype=None):
    """A view of one of clbt's buffers (an int handle): a
    pyopencl.array.Array of shape and dtype (or a pyopencl.Buffer when shape
    is None) on the same memory, or a Buffer without PyOpenCL. The view
    holds its own reference, so it outlives the table."""
    if pyopencl is None:
        return Buffer(buffer, retain=True)
    view = pyopencl.Buffer.from_int_ptr(buffer, retain=True)
    if shape is None:
        return view
    queue = pyopencl.CommandQueue.from_int_ptr(queue, retain=True)
    return pyopencl.array.Array(queue, shape, dtype, data=view)
