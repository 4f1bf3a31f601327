"""The few OpenCL calls the package makes itself (through ctypes, on the
OpenCL loader clbt links), and the bridge to PyOpenCL when it is installed.

With PyOpenCL, clbt's buffers come back as pyopencl.Buffer and
pyopencl.array.Array views of the same memory (no copy), its events as
pyopencl.Event, and PyOpenCL objects are accepted wherever a buffer, a queue
or an event goes. Without it, all of these are integer handles (the
cl_mem, cl_event, ... pointer values), and the package's own calls below
read and write buffers.
"""
import ctypes
from ctypes import POINTER, byref, c_int32, c_size_t, c_uint, c_uint64, c_void_p

from ._errors import Error

try:
    import pyopencl
    import pyopencl.array
except ImportError:  # the integer handles then stand in
    pyopencl = None

_cl = ctypes.CDLL("libOpenCL.so.1")
_cl.clGetPlatformIDs.argtypes = (c_uint, c_void_p, POINTER(c_uint))
_cl.clGetDeviceIDs.argtypes = (c_void_p, c_uint64, c_uint, c_void_p, POINTER(c_uint))
_cl.clCreateBuffer.restype = c_void_p
_cl.clCreateBuffer.argtypes = (c_void_p, c_uint64, c_size_t, c_void_p, POINTER(c_int32))
for _name in ("clEnqueueWriteBuffer", "clEnqueueReadBuffer"):
    getattr(_cl, _name).argtypes = (c_void_p, c_void_p, c_uint, c_size_t, c_size_t,
                                    c_void_p, c_uint, c_void_p, c_void_p)
for _name in ("clReleaseMemObject", "clReleaseEvent", "clFinish"):
    getattr(_cl, _name).argtypes = (c_void_p,)
_cl.clWaitForEvents.argtypes = (c_uint, c_void_p)

CL_MEM_READ_ONLY = 1 << 2
CL_DEVICE_TYPE_ALL = 0xFFFFFFFF


def check(code, call):
    """Raises clbt.Error for a failed OpenCL call."""
    if code:
        raise Error(code, "%s failed" % call)


def device_ids():
    """Every OpenCL device of every platform, as integer handles."""
    count = c_uint()
    code = _cl.clGetPlatformIDs(0, None, byref(count))
    check(code, "clGetPlatformIDs")
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


def create_buffer(context, size):
    error = c_int32()
    buffer = _cl.clCreateBuffer(context, CL_MEM_READ_ONLY, size, None, byref(error))
    check(error.value, "clCreateBuffer")
    return buffer


def release_buffer(buffer):
    check(_cl.clReleaseMemObject(buffer), "clReleaseMemObject")


def write(queue, buffer, address, size, event=None):
    """Enqueues a write that reads size bytes at address; returns without
    waiting. event, a c_void_p, receives the write's event."""
    check(_cl.clEnqueueWriteBuffer(queue, buffer, 0, 0, size, address, 0, None,
                                   None if event is None else byref(event)),
          "clEnqueueWriteBuffer")


def read(queue, buffer, array):
    """Reads the buffer's first array.nbytes bytes into a numpy array; waits."""
    check(_cl.clEnqueueReadBuffer(queue, buffer, 1, 0, array.nbytes, array.ctypes.data,
                                  0, None, None), "clEnqueueReadBuffer")
    return array


def wait(event):
    check(_cl.clWaitForEvents(1, byref(event)), "clWaitForEvents")


def finish(queue):
    check(_cl.clFinish(queue), "clFinish")


def release_event(event):
    """Releases an integer event handle (what clbt hands back without
    PyOpenCL)."""
    check(_cl.clReleaseEvent(event), "clReleaseEvent")


def handle(obj):
    """The integer handle of a PyOpenCL object or of a handle; None stays
    None. A pyopencl.array.Array must start at its buffer's start."""
    if obj is None or isinstance(obj, int):
        return obj
    if pyopencl is not None and isinstance(obj, pyopencl.array.Array):
        if obj.offset:
            raise Error(-4002, "a pyopencl array with an offset (%d bytes) is not "
                               "accepted; pass its base_data" % obj.offset)
        obj = obj.base_data
    return obj.int_ptr


def wait_list(events):
    """(count, address, keep-alive) of a wait list of events or handles."""
    if not events:
        return 0, None, None
    array = (c_void_p * len(events))(*[handle(e) for e in events])
    return len(events), ctypes.addressof(array), array


def event_object(event):
    """A new event handle as a pyopencl.Event that owns it, or the handle."""
    if pyopencl is None:
        return event
    return pyopencl.Event.from_int_ptr(event, retain=False)


def buffer_object(buffer, queue, shape=None, dtype=None):
    """A view of one of clbt's buffers: a pyopencl.array.Array of shape and
    dtype (or a pyopencl.Buffer when shape is None) on the same memory, or
    the integer handle without PyOpenCL. The view holds its own reference."""
    if pyopencl is None:
        return buffer
    view = pyopencl.Buffer.from_int_ptr(buffer, retain=True)
    if shape is None:
        return view
    queue = pyopencl.CommandQueue.from_int_ptr(queue, retain=True)
    return pyopencl.array.Array(queue, shape, dtype, data=view)
