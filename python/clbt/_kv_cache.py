"""The KV-cache write (clbt_kv_cache): a layer's paged cache, described and
checked once, and one launch per write of a batch's K and V.

The buffers are device arrays: a pyopencl.array.Array (any shape, strides
and offset: the element offset is taken from it), a clbt.DeviceArray, or a
buffer (pyopencl.Buffer, clbt.Buffer) counted from its start. Offsets and
strides count elements. docs/python.md, "The KV-cache write", has an
example; clbt.vllm.reshape_and_cache_flash is vLLM's op over this class.
"""
from __future__ import annotations

import contextlib
import ctypes
import math
import operator
import threading
from ctypes import byref, c_int, c_uint32, c_uint64, c_void_p
from typing import Any, Optional, Sequence

import numpy as np

from . import _arguments as check
from . import _opencl
from ._core import Device, _check, _Closable, _CObject
from ._device_array import DeviceArray
from ._errors import Error, TypeMismatchError
from ._library import _SizedConfig, lib
from ._threads import one_thread_at_a_time

#: clbt_kv_dtype by name, and the bytes each element takes.
DTYPES = {"float32": 1, "float16": 2, "bfloat16": 3, "fp8_e4m3": 4}
ITEMSIZES = {1: 4, 2: 2, 3: 2, 4: 1}
#: clbt_kv_layout by name.
LAYOUTS = {"flash": 0, "head_major": 1}


class KVCacheConfig(_SizedConfig):
    """clbt_kv_cache_config (CLBT_KV_CACHE_CONFIG_INIT)."""
    _fields_ = [(name, c_uint32) for name in ("struct_size",)] + [
        (name, c_int) for name in ("layout", "cache_dtype", "input_dtype")] + [
        (name, c_uint32) for name in ("num_kv_heads", "head_size", "block_size",
                                      "num_blocks")] + [
        ("key_cache", c_void_p), ("value_cache", c_void_p)] + [
        (name, c_uint64) for name in ("key_offset", "value_offset", "block_stride",
                                      "page_stride", "head_stride")]


class KVWrite(_SizedConfig):
    """clbt_kv_write (CLBT_KV_WRITE_INIT)."""
    _fields_ = [("struct_size", c_uint32), ("num_tokens", c_uint32), ("key", c_void_p),
                ("value", c_void_p), ("slot_mapping", c_void_p)] + [
        (name, c_uint64) for name in ("key_offset", "key_token_stride", "value_offset",
                                      "value_token_stride", "slot_mapping_offset")] + [
        ("k_scale", ctypes.c_float), ("v_scale", ctypes.c_float)]


lib.clbt_kv_cache_create.restype = c_int
lib.clbt_kv_cache_create.argtypes = (c_void_p, c_void_p, c_void_p)
lib.clbt_kv_cache_destroy.restype = None
lib.clbt_kv_cache_destroy.argtypes = (c_void_p,)
lib.clbt_kv_cache_enqueue_write.restype = c_int
lib.clbt_kv_cache_enqueue_write.argtypes = (c_void_p, c_void_p, ctypes.c_uint, c_void_p,
                                            c_void_p)
lib.clbt_kv_cache_read_rejected_tokens.restype = c_int
lib.clbt_kv_cache_read_rejected_tokens.argtypes = (c_void_p, c_void_p)
lib.clbt_kv_cache_reset_rejected_tokens.restype = c_int
lib.clbt_kv_cache_reset_rejected_tokens.argtypes = (c_void_p,)


def dtype_code(name: str, argument: str) -> int:
    """clbt_kv_dtype of a name ("float32", "float16", "bfloat16",
    "fp8_e4m3"; "fp8" and "fp8_e4m3fn" too)."""
    if isinstance(name, str):
        code = DTYPES.get({"fp8": "fp8_e4m3", "fp8_e4m3fn": "fp8_e4m3"}.get(name, name))
        if code is not None:
            return code
    raise Error(check.INVALID_ARGUMENT, "%s is %r; one of %s expected" % (
        argument, name, ", ".join(sorted(DTYPES))))


def device_buffer(obj: Any, itemsize: int, name: str):
    """(int handle, element offset, element size or None) of a device
    array or buffer; an array's element size must be itemsize."""
    pyopencl = _opencl.pyopencl
    if isinstance(obj, DeviceArray) or (pyopencl is not None
                                        and isinstance(obj, pyopencl.array.Array)):
        size = obj.np_dtype.itemsize if isinstance(obj, DeviceArray) else obj.dtype.itemsize
        if size != itemsize:
            raise TypeMismatchError(check.INVALID_ARGUMENT, "%s has %d-byte elements (%s); the "
                                    "cache's config says %d" % (
                                        name, size, getattr(obj, "np_dtype", obj.dtype),
                                        itemsize))
        if isinstance(obj, DeviceArray):
            handle, offset = obj.cl_mem, obj.cl_offset
        else:
            handle, offset = obj.base_data.int_ptr, obj.offset
        if offset % itemsize:
            raise Error(check.INVALID_ARGUMENT, "%s starts %d bytes into its buffer, not a "
                        "whole number of %d-byte elements" % (name, offset, itemsize))
        return handle, offset // itemsize
    if not check.is_device_array(obj) or isinstance(obj, int):
        raise TypeMismatchError(check.INVALID_ARGUMENT, "%s is %s; a device array "
                                "(pyopencl.array.Array, clbt.DeviceArray) or buffer "
                                "(pyopencl.Buffer, clbt.Buffer) expected" % (
                                    name, _opencl.describe(obj)))
    return _opencl.handle(obj, "buffer", name), 0


@one_thread_at_a_time(operator.attrgetter("_lock"))
class KVCache(_Closable):
    """A layer's paged KV cache (clbt_kv_cache): its buffers, layout and
    types, checked once.

    KVCache(device, key_cache, value_cache=None, num_kv_heads=, head_size=,
    block_size=, num_blocks=, cache_dtype=, input_dtype=None, layout="flash")
    describes vLLM's flash layout [num_blocks, block_size, num_kv_heads,
    head_size] or "head_major" [num_blocks, num_kv_heads, block_size,
    head_size] of cache_dtype ("float32", "float16", "bfloat16",
    "fp8_e4m3"); input_dtype is the K/V's type (None: the cache's; an fp8
    cache needs it). value_cache None keeps V in key_cache too
    ([num_blocks, 2, ...], vLLM's kv_cache[:, 0] and [:, 1]). Offsets and
    strides (0: the layout's) count elements, as clbt_kv_cache_config says;
    an array's own offset is added to key_offset / value_offset.

    A C cache is one thread's at a time (its one cl_kernel takes each
    write's arguments), so every public call holds the cache's lock, as a
    Table's does (_threads): threads may share a cache, and close() waits
    for a call in flight."""
    _kind = "KV cache"
    _lock = contextlib.nullcontext()  # until _create has made the cache's

    def __init__(self, device: Device, key_cache: Any, value_cache: Any = None, *,
                 num_kv_heads: int, head_size: int, block_size: int, num_blocks: int,
                 cache_dtype: str, input_dtype: Optional[str] = None, layout: str = "flash",
                 key_offset: int = 0, value_offset: int = 0, block_stride: int = 0,
                 page_stride: int = 0, head_stride: int = 0):
        if not isinstance(device, Device):
            raise TypeMismatchError(check.INVALID_ARGUMENT, "device is %s; a clbt.Device "
                                    "expected" % _opencl.describe(device))
        if layout not in LAYOUTS:
            raise Error(check.INVALID_ARGUMENT, "layout is %r; 'flash' or 'head_major' "
                        "expected" % (layout,))
        cache_code = dtype_code(cache_dtype, "cache_dtype")
        input_code = 0 if input_dtype is None else dtype_code(input_dtype, "input_dtype")
        itemsize = ITEMSIZES[cache_code]
        key_handle, key_at = device_buffer(key_cache, itemsize, "key_cache")
        value_handle, value_at = (None, 0) if value_cache is None else device_buffer(
            value_cache, itemsize, "value_cache")
        key_offset = check.integer(key_offset, "key_offset", ctypes.c_size_t)
        value_offset = check.integer(value_offset, "value_offset", ctypes.c_size_t)
        if value_cache is None:
            # One buffer: V from key_cache's start, or (0) one block past K.
            value_at = key_at if value_offset else 0
        config = KVCacheConfig(
            layout=LAYOUTS[layout], cache_dtype=cache_code, input_dtype=input_code,
            num_kv_heads=check.u32(num_kv_heads, "num_kv_heads"),
            head_size=check.u32(head_size, "head_size"),
            block_size=check.u32(block_size, "block_size"),
            num_blocks=check.u32(num_blocks, "num_blocks"), key_cache=key_handle,
            value_cache=value_handle, key_offset=key_at + key_offset,
            value_offset=value_at + value_offset,
            block_stride=check.integer(block_stride, "block_stride", ctypes.c_size_t),
            page_stride=check.integer(page_stride, "page_stride", ctypes.c_size_t),
            head_stride=check.integer(head_stride, "head_stride", ctypes.c_size_t))
        self._create(device, config)

    @classmethod
    def from_config(cls, device: Device, config: KVCacheConfig) -> "KVCache":
        """A cache of a filled clbt_kv_cache_config (buffer handles and
        element offsets from their buffers' starts)."""
        cache = cls.__new__(cls)
        cache._create(device, config)
        return cache

    def _create(self, device, config):
        self._lock = threading.RLock()
        out = c_void_p()
        held = device._object()  # until the C cache has its own reference
        _check(lib.clbt_kv_cache_create(held.pointer, byref(config), byref(out)))
        self._c = _CObject(out.value, lib.clbt_kv_cache_destroy)
        self._device = device  # the device outlives its caches' Python objects
        self.num_kv_heads, self.head_size = config.num_kv_heads, config.head_size
        self.cache_dtype = config.cache_dtype
        self.input_dtype = config.input_dtype or config.cache_dtype

    def write(self, key: Any, value: Any, slot_mapping: Any, num_tokens: Optional[int] = None,
              *, key_offset: int = 0, key_token_stride: int = 0, value_offset: int = 0,
              value_token_stride: int = 0, slot_mapping_offset: int = 0,
              k_scale: float = 1.0, v_scale: float = 1.0,
              wait_for: Optional[Sequence[Any]] = None, event: bool = False):
        """Enqueues one layer's write (clbt_kv_cache_enqueue_write): token t
        of key and value (input_dtype [num_tokens, num_kv_heads, head_size],
        heads contiguous, token_stride elements apart; 0: a row) to slot
        slot_mapping[t] (int64). Device arrays or buffers; an array's own
        offset adds to its offset here, and num_tokens defaults to the
        slot mapping's length when it is an array. -1 is skipped; a slot
        past the cache is skipped and counted (rejected_tokens). An fp8
        cache divides K by k_scale and V by v_scale. Returns without
        waiting; event=True returns the write's event."""
        handle = self._live()
        itemsize = ITEMSIZES[self.input_dtype]
        key_handle, key_at = device_buffer(key, itemsize, "key")
        value_handle, value_at = device_buffer(value, itemsize, "value")
        slots_handle, slots_at = device_buffer(slot_mapping, 8, "slot_mapping")
        if num_tokens is None:
            if not hasattr(slot_mapping, "shape"):
                raise Error(check.INVALID_ARGUMENT,
                            "num_tokens is needed with a slot_mapping buffer")
            num_tokens = int(np.prod(slot_mapping.shape)) - slot_mapping_offset
        scales = {}
        for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
            try:
                scales[name] = float(scale)
            except (TypeError, ValueError):
                raise TypeMismatchError(check.INVALID_ARGUMENT, "%s is %s; a float expected"
                                        % (name, _opencl.describe(scale))) from None
        request = KVWrite(
            num_tokens=check.u32(num_tokens, "num_tokens"), key=key_handle, value=value_handle,
            slot_mapping=slots_handle,
            key_offset=key_at + check.integer(key_offset, "key_offset", ctypes.c_size_t),
            key_token_stride=check.integer(key_token_stride, "key_token_stride",
                                           ctypes.c_size_t),
            value_offset=value_at + check.integer(value_offset, "value_offset",
                                                  ctypes.c_size_t),
            value_token_stride=check.integer(value_token_stride, "value_token_stride",
                                             ctypes.c_size_t),
            slot_mapping_offset=slots_at + check.integer(slot_mapping_offset,
                                                         "slot_mapping_offset",
                                                         ctypes.c_size_t),
            **scales)
        count, address, held = _opencl.wait_list(wait_for)
        out = c_void_p() if event else None
        _check(lib.clbt_kv_cache_enqueue_write(handle, byref(request), count, address,
                                               None if out is None else byref(out)))
        return _opencl.event_object(out.value) if event else None

    @property
    def rejected_tokens(self) -> int:
        """The tokens the writes have rejected (slots past the cache) since
        creation or the last reset; waits for the queue to reach the read."""
        count = c_uint32()
        _check(lib.clbt_kv_cache_read_rejected_tokens(self._live(), byref(count)))
        return count.value

    def reset_rejected_tokens(self) -> None:
        _check(lib.clbt_kv_cache_reset_rejected_tokens(self._live()))

    def close(self) -> None:
        """Releases the C cache once no call holds it (the lock makes close
        wait for one in flight); closing twice is fine."""
        _Closable.close(self)

    def __repr__(self):
        if self.closed:
            return "<clbt.KVCache closed>"
        return "<clbt.KVCache %d heads x %d>" % (self.num_kv_heads, self.head_size)


def finite_scale(scale: Any, name: str) -> float:
    """A per-tensor scale as a float: a number, or an array of one element
    (a device array is read, which waits for the queue)."""
    if hasattr(scale, "get") and hasattr(scale, "shape"):  # pyopencl.array.Array
        scale = scale.get()
    elif isinstance(scale, DeviceArray):
        scale = scale.numpy()
    try:
        values = np.asarray(scale, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeMismatchError(check.INVALID_ARGUMENT, "%s is %s; a float expected" % (
            name, _opencl.describe(scale))) from None
    if values.size != 1:
        raise Error(check.INVALID_ARGUMENT, "%s has %d elements; one per-tensor scale "
                    "expected (per-head scales are not supported)" % (name, values.size))
    value = float(values[0])
    if not math.isfinite(value) or value <= 0:
        raise Error(check.INVALID_ARGUMENT, "%s %r is not a finite value above 0" % (
            name, value))
    return value
