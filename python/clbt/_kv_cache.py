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
import re
import threading
from ctypes import byref, c_int, c_uint32, c_uint64, c_void_p
from typing import Any, Optional, Sequence

import numpy as np

from . import _arguments as check
from . import _opencl
from ._core import Device, _check, _Closable, _CObject
from ._device_array import DeviceArray
from ._errors import (BUFFER_TOO_SMALL, INVALID_ARGUMENT, SIZE_OVERFLOW, Error, TypeMismatchError,
                      wrong_type)
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


class KVCacheAddressing(ctypes.Structure):
    """clbt_kv_cache_addressing: where a cache's elements are, as C
    resolved its config (every default filled in)."""
    _fields_ = [(name, c_uint64) for name in ("key_offset", "value_offset", "block_stride",
                                              "page_stride", "head_stride", "tensor_span")]


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
lib.clbt_kv_cache_get_addressing.restype = c_int
lib.clbt_kv_cache_get_addressing.argtypes = (c_void_p, c_void_p)


def enqueue_write(cache: "KVCache", request, count, address, event) -> None:
    """clbt_kv_cache_enqueue_write, raising its refusal. For a cache
    described with K and V exchanged (its V starts the shared buffer), C's
    message names the half C fills: each write->key... and k_scale is then
    the caller's value's, and the other way round."""
    status = lib.clbt_kv_cache_enqueue_write(cache._live(), byref(request), count, address,
                                             event)
    if status:
        message = lib.clbt_last_error().decode()
        if cache._exchanged:
            message = re.sub(r"write->(key|value|k_scale|v_scale)", lambda m: "write->" + {
                "key": "value", "value": "key", "k_scale": "v_scale",
                "v_scale": "k_scale"}[m.group(1)], message)
        raise Error(status, message)


def dtype_code(name: str, argument: str) -> int:
    """clbt_kv_dtype of a name ("float32", "float16", "bfloat16",
    "fp8_e4m3"; "fp8" and "fp8_e4m3fn" too)."""
    if isinstance(name, str):
        code = DTYPES.get({"fp8": "fp8_e4m3", "fp8_e4m3fn": "fp8_e4m3"}.get(name, name))
        if code is not None:
            return code
    raise Error(INVALID_ARGUMENT, "%s is %r; one of %s expected" % (
        argument, name, ", ".join(sorted(DTYPES))))


def device_buffer(obj: Any, itemsize: int, name: str):
    """(int handle, element offset, extent, strided) of a device array or
    buffer: the extent is the elements an array reaches from its offset
    (None for a buffer, whose size C checks); strided is (shape, byte
    strides) of an array that is not one run of elements, else None. An
    array's element size must be itemsize."""
    pyopencl = _opencl.pyopencl
    if isinstance(obj, DeviceArray) or (pyopencl is not None
                                        and isinstance(obj, pyopencl.array.Array)):
        size = obj.np_dtype.itemsize if isinstance(obj, DeviceArray) else obj.dtype.itemsize
        if size != itemsize:
            raise TypeMismatchError(INVALID_ARGUMENT, "%s has %d-byte elements (%s); the "
                                    "cache's config says %d" % (
                                        name, size, getattr(obj, "np_dtype", obj.dtype),
                                        itemsize))
        if isinstance(obj, DeviceArray):
            handle, offset, strides = obj.cl_mem, obj.cl_offset, obj._strides
        else:
            handle, offset, strides = obj.base_data.int_ptr, obj.offset, obj.strides
        if offset % itemsize:
            raise Error(INVALID_ARGUMENT, "%s starts %d bytes into its buffer, not a "
                        "whole number of %d-byte elements" % (name, offset, itemsize))
        reach, contiguous = extent(obj.shape, strides, itemsize)
        return handle, offset // itemsize, reach, \
            None if contiguous else (tuple(obj.shape), tuple(strides))
    if not check.is_device_array(obj) or isinstance(obj, int):
        raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; a device array "
                                "(pyopencl.array.Array, clbt.DeviceArray) or buffer "
                                "(pyopencl.Buffer, clbt.Buffer) expected" % (
                                    name, _opencl.describe(obj)))
    return _opencl.handle(obj, "buffer", name), 0, None, None


def tensor_view(array, name, ndim):
    """(buffer handle, element offset, shape, element strides, dtype) of a
    device array of ndim dimensions: a pyopencl.array.Array or a
    clbt.DeviceArray."""
    pyopencl = _opencl.pyopencl
    if isinstance(array, DeviceArray):
        array._memory.ready()  # what is owed on it (a facade's array), or its refusal
        dtype, offset, handle = array.np_dtype, array.cl_offset, array.cl_mem
        byte_strides = array._strides
    elif pyopencl is not None and isinstance(array, pyopencl.array.Array):
        dtype, offset, handle = array.dtype, array.offset, array.base_data.int_ptr
        byte_strides = array.strides
    else:
        raise wrong_type("%s is %s; a pyopencl.array.Array or clbt.DeviceArray expected"
                         % (name, _opencl.describe(array)))
    if len(array.shape) != ndim:
        raise Error(INVALID_ARGUMENT, "%s has shape %s; %d dimensions expected" % (
            name, tuple(array.shape), ndim))
    strides = tuple(s // dtype.itemsize for s in byte_strides)
    # C counts every stride forward from an array's first element, in whole
    # elements, and takes 0 for "the layout's" (a cache's) or "a row" (a
    # token's): passed on, an expanded dimension (stride 0) would be read or
    # written at elements past the array's own, a reversed one (below 0)
    # would wrap past 2^63, and part of an element would be rounded down.
    for n, s in zip(array.shape, byte_strides):
        if n > 1 and s % dtype.itemsize:
            raise Error(INVALID_ARGUMENT, "%s has byte strides %s; each must be a whole "
                        "number of its %d-byte elements" % (name, tuple(byte_strides),
                                                             dtype.itemsize))
        if n > 1 and s <= 0:
            raise Error(INVALID_ARGUMENT, "%s has strides %s; each dimension of more than "
                        "one element must have a stride above 0 (clbt reads and writes no "
                        "expanded or reversed view)" % (name, strides))
    if array.shape[-1] > 1 and strides[-1] != 1:
        raise Error(INVALID_ARGUMENT, "%s has strides %s; its last dimension must be "
                    "contiguous" % (name, tuple(strides)))
    if offset % dtype.itemsize:  # C counts offsets in elements: refused, as KVCache does
        raise Error(INVALID_ARGUMENT, "%s starts %d bytes into its buffer, not a whole "
                    "number of %d-byte elements" % (name, offset, dtype.itemsize))
    return handle, offset // dtype.itemsize, tuple(array.shape), tuple(strides), dtype


def _element_strides(shape, byte_strides, itemsize):
    """Byte strides in elements; None when one of a dimension of more than
    one element is no whole number of them."""
    if any(n > 1 and s % itemsize for n, s in zip(shape, byte_strides)):
        return None
    return tuple(s // itemsize for s in byte_strides)


def _is_contiguous(shape, strides):
    """Whether element strides lay shape out row-major with no gaps
    (dimensions of one element, whose stride nothing uses, aside)."""
    step = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def refuse_strided_entries(strided, itemsize, name):
    """Refuses a strided array (device_buffer's) where C reads consecutive
    elements: C takes a slot mapping's entries one after another, with no
    stride."""
    shape, byte_strides = strided
    strides = _element_strides(shape, byte_strides, itemsize)
    raise Error(INVALID_ARGUMENT, "%s has strides %s for its shape %s: C reads a slot "
                "mapping's entries one after another; pass a contiguous array" % (
                    name, strides or byte_strides, shape))


def token_rows(strided, itemsize, name, row):
    """(tokens, token stride in elements, element strides) of a write
    input that is a strided array (device_buffer's): C reads token t's
    row of num_kv_heads x head_size elements one after another, from
    offset + t x stride, so the view's last dimensions must hold that row
    without gaps and its first ones must step through the tokens by one
    stride above 0 (qkv[:, 1] of a [T, 3, H, D] array). Anything else is
    refused, naming the array."""
    shape, byte_strides = strided
    strides = _element_strides(shape, byte_strides, itemsize)
    split, elements = len(shape), 1  # shape[split:] is a token's row
    while split > 0 and elements < row:
        split -= 1
        elements *= shape[split]
    stride = tokens = 1
    addressable = strides is not None and elements == row and \
        _is_contiguous(shape[split:], strides[split:])
    for n, s in zip(reversed(shape[:split]), reversed((strides or ())[:split])):
        if n > 1 and addressable:  # the token dimensions step as one
            addressable = s > 0 and (tokens == 1 or s == stride * tokens)
            stride = s if tokens == 1 else stride
        tokens *= n
    if not addressable:
        raise Error(INVALID_ARGUMENT, "%s has strides %s for its shape %s: C reads each "
                    "token's num_kv_heads x head_size = %d elements one after another, "
                    "tokens one stride apart; pass a contiguous array" % (
                        name, strides or byte_strides, shape, row))
    return tokens, stride, strides


def element_offset(at: int, offset: int, name: str, array: str) -> int:
    """An array's own element offset plus the offset given, as C's uint64
    field takes it: a sum past 64 bits (ctypes would wrap it) is refused
    with the status C gives one of its own."""
    total = at + offset
    if total >> 64:
        raise Error(SIZE_OVERFLOW, "%s %d plus %s's own offset of %d elements exceeds "
                    "64 bits" % (name, offset, array, at))
    return total


def extent(shape, strides, itemsize: int):
    """(the elements a view of shape and byte strides reaches from its
    offset, up to its last element's end; whether it is one run of
    elements, row-major). C reads forward from the offset only, so a
    negative stride, which reaches back, adds nothing."""
    reach, step, contiguous = 0, itemsize, True
    # One loop for both: this runs for every write's inputs.
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 0:
            return 0, True
        if s > 0:
            reach += (n - 1) * s
        if n != 1 and s != step:
            contiguous = False
        step *= n
    return (reach + itemsize) // itemsize, contiguous


def holds(name: str, reach: Optional[int], needed: int, why: str) -> None:
    """Refuses an array whose extent (None: a buffer) is short of what C
    will reach in it: C checks only the array's buffer, which may go on
    past the array's end."""
    if reach is not None:
        check.at_least(name, reach, needed, why, BUFFER_TOO_SMALL)


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
    an array's own offset is added to key_offset / value_offset, and its
    extent (from that offset to its last element's end) must hold the
    tensors in it, as the inputs of write must hold what it reads.

    A C cache is one thread's at a time (its one cl_kernel takes each
    write's arguments), so every public call holds the cache's lock, as a
    Table's does (_threads): threads may share a cache, and close() waits
    for a call in flight."""
    _kind = "KV cache"
    _lock = contextlib.nullcontext()  # until _create has made the cache's
    _exchanged = False  # whether C's K half is the caller's V (__init__)

    def __init__(self, device: Device, key_cache: Any, value_cache: Any = None, *,
                 num_kv_heads: int, head_size: int, block_size: int, num_blocks: int,
                 cache_dtype: str, input_dtype: Optional[str] = None, layout: str = "flash",
                 key_offset: int = 0, value_offset: int = 0, block_stride: int = 0,
                 page_stride: int = 0, head_stride: int = 0):
        if not isinstance(device, Device):
            raise TypeMismatchError(INVALID_ARGUMENT, "device is %s; a clbt.Device "
                                    "expected" % _opencl.describe(device))
        if layout not in LAYOUTS:
            raise Error(INVALID_ARGUMENT, "layout is %r; 'flash' or 'head_major' "
                        "expected" % (layout,))
        cache_code = dtype_code(cache_dtype, "cache_dtype")
        input_code = 0 if input_dtype is None else dtype_code(input_dtype, "input_dtype")
        itemsize = ITEMSIZES[cache_code]
        key_handle, key_at, key_reach, _ = device_buffer(key_cache, itemsize, "key_cache")
        value_handle, value_at, value_reach, _ = (None, 0, None, None) \
            if value_cache is None else device_buffer(value_cache, itemsize, "value_cache")
        key_offset = check.integer(key_offset, "key_offset", ctypes.c_size_t)
        value_offset = check.integer(value_offset, "value_offset", ctypes.c_size_t)
        if value_cache is None:
            # One buffer: V from key_cache's start, or (0) one block past K.
            value_at = key_at if value_offset else 0
        key_offset = element_offset(key_at, key_offset, "key_offset", "key_cache")
        value_offset = element_offset(value_at, value_offset, "value_offset",
                                      "key_cache" if value_cache is None else "value_cache")
        # value_cache given as key_cache's buffer with V at its element 0:
        # C reads a value_offset of 0 in one buffer as "one block past K",
        # so the cache is described with K and V exchanged (V as the K half,
        # at key_offset 0, which C takes literally), and write exchanges
        # its inputs and scales to match (as _cache_ops.value_first does).
        # Both at 0 keep C's one-buffer rule.
        exchanged = value_cache is not None and value_handle == key_handle and \
            value_offset == 0 and key_offset != 0
        if exchanged:
            key_offset, value_offset = value_offset, key_offset
        config = KVCacheConfig(
            layout=LAYOUTS[layout], cache_dtype=cache_code, input_dtype=input_code,
            num_kv_heads=check.u32(num_kv_heads, "num_kv_heads"),
            head_size=check.u32(head_size, "head_size"),
            block_size=check.u32(block_size, "block_size"),
            num_blocks=check.u32(num_blocks, "num_blocks"), key_cache=key_handle,
            value_cache=value_handle, key_offset=key_offset, value_offset=value_offset,
            block_stride=check.integer(block_stride, "block_stride", ctypes.c_size_t),
            page_stride=check.integer(page_stride, "page_stride", ctypes.c_size_t),
            head_stride=check.integer(head_stride, "head_stride", ctypes.c_size_t))
        self._create(device, config)
        self._exchanged = exchanged
        try:  # after C has checked the config, which the span assumes
            self._check_extents(config, key_at, key_reach, value_cache is None, value_at,
                                value_reach)
        except Error:
            self.close()
            raise

    def _check_extents(self, config, key_at, key_reach, value_in_key, value_at, value_reach):
        """Refuses cache arrays (their extents, not their buffers) shorter
        than the tensors C will write in them, where C resolved them."""
        a = self.addressing
        shape = "%d blocks of %d slots of %d heads of %d" % (
            config.num_blocks, config.block_size, config.num_kv_heads, config.head_size)
        if value_in_key:
            holds("key_cache", key_reach,
                  max(a.key_offset, a.value_offset) - key_at + a.tensor_span,
                  "K at %d and V at %d of %s" % (a.key_offset - key_at,
                                                 a.value_offset - key_at, shape))
            return
        holds("key_cache", key_reach, a.key_offset - key_at + a.tensor_span,
              "K at %d of %s" % (a.key_offset - key_at, shape))
        holds("value_cache", value_reach, a.value_offset - value_at + a.tensor_span,
              "V at %d of %s" % (a.value_offset - value_at, shape))

    @classmethod
    def from_config(cls, device: Device, config: KVCacheConfig,
                    exchanged: bool = False) -> "KVCache":
        """A cache of a filled clbt_kv_cache_config (buffer handles and
        element offsets from their buffers' starts); exchanged: the
        config's K half is the caller's V (as __init__ describes V at
        element 0 of key_cache's buffer)."""
        cache = cls.__new__(cls)
        cache._create(device, config)
        cache._exchanged = exchanged
        return cache

    def _in_c_order(self, key_input, value_input):
        """A write's K and V inputs (anything alike: handles, offsets,
        strides, scales) in the order C's halves take them."""
        return (value_input, key_input) if self._exchanged else (key_input, value_input)

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
        slot_mapping[t] (int64, contiguous). Device arrays or buffers; an
        array's own offset adds to its offset here, a strided view
        (qkv[:, 1]) is read with its own token stride (token_rows), and
        num_tokens defaults to the slot mapping's length when it is an
        array. -1 is skipped; a slot
        past the cache is skipped and counted (rejected_tokens). An fp8
        cache divides K by k_scale and V by v_scale. Returns without
        waiting; event=True returns the write's event."""
        self._live()  # a closed cache is refused before anything is read
        itemsize = ITEMSIZES[self.input_dtype]
        key_handle, key_at, key_reach, key_strided = device_buffer(key, itemsize, "key")
        value_handle, value_at, value_reach, value_strided = device_buffer(value, itemsize,
                                                                           "value")
        slots_handle, slots_at, slots_reach, slots_strided = device_buffer(slot_mapping, 8,
                                                                           "slot_mapping")
        if slots_reach is not None:  # an array: of int64's, not of other 8-byte values
            slots_type = np.dtype(slot_mapping.np_dtype if isinstance(slot_mapping, DeviceArray)
                                  else slot_mapping.dtype)
            if slots_type.kind not in "iu":
                raise TypeMismatchError(INVALID_ARGUMENT, "slot_mapping has dtype %s; int64 "
                                        "expected" % slots_type)
        if num_tokens is None:
            if not hasattr(slot_mapping, "shape"):
                raise Error(INVALID_ARGUMENT,
                            "num_tokens is needed with a slot_mapping buffer")
            num_tokens = math.prod(slot_mapping.shape) - slot_mapping_offset
        k_scale, v_scale = as_float(k_scale, "k_scale"), as_float(v_scale, "v_scale")
        if self.cache_dtype == DTYPES["fp8_e4m3"] != self.input_dtype:
            # Checked here, by the caller's names: C names the scale of the
            # half it fills, V's for an exchanged cache (__init__).
            k_scale = finite_scale(k_scale, "k_scale")
            v_scale = finite_scale(v_scale, "v_scale")
        num_tokens = check.u32(num_tokens, "num_tokens")
        key_offset = check.size(key_offset, "key_offset")
        key_token_stride = check.size(key_token_stride, "key_token_stride")
        value_offset = check.size(value_offset, "value_offset")
        value_token_stride = check.size(value_token_stride, "value_token_stride")
        slot_mapping_offset = check.size(slot_mapping_offset, "slot_mapping_offset")
        if slots_strided:
            refuse_strided_entries(slots_strided, 8, "slot_mapping")
        if key_strided:
            key_token_stride, key_reach = self._view_stride(
                key_strided, itemsize, "key", num_tokens, key_offset, key_token_stride)
        if value_strided:
            value_token_stride, value_reach = self._view_stride(
                value_strided, itemsize, "value", num_tokens, value_offset, value_token_stride)
        (k_handle, k_offset, k_stride, k_scale), (v_handle, v_offset, v_stride, v_scale) = \
            self._in_c_order(
                (key_handle, element_offset(key_at, key_offset, "key_offset", "key"),
                 key_token_stride, k_scale),
                (value_handle, element_offset(value_at, value_offset, "value_offset",
                                              "value"), value_token_stride, v_scale))
        request = KVWrite(
            num_tokens=num_tokens, key=k_handle, value=v_handle, slot_mapping=slots_handle,
            key_offset=k_offset, key_token_stride=k_stride, value_offset=v_offset,
            value_token_stride=v_stride,
            slot_mapping_offset=element_offset(slots_at, slot_mapping_offset,
                                               "slot_mapping_offset", "slot_mapping"),
            k_scale=k_scale, v_scale=v_scale)
        if num_tokens:
            self._check_input(num_tokens, "key", key_reach, key_offset, key_token_stride)
            self._check_input(num_tokens, "value", value_reach, value_offset,
                              value_token_stride)
            if slots_reach is not None and slots_reach < slot_mapping_offset + num_tokens:
                holds("slot_mapping", slots_reach, slot_mapping_offset + num_tokens,
                      "num_tokens %d from slot_mapping_offset %d" % (num_tokens,
                                                                     slot_mapping_offset))
        count, address, held = _opencl.wait_list(wait_for)
        out = c_void_p() if event else None
        enqueue_write(self, request, count, address, None if out is None else byref(out))
        return _opencl.event_object(out.value) if event else None

    def _view_stride(self, strided, itemsize, name, num_tokens, offset, token_stride):
        """(token stride, extent) of a write input that is a strided array
        (device_buffer's): its own token stride (token_rows), its tokens
        checked here (extent None: its buffer is C's to check)."""
        tokens, stride, strides = token_rows(strided, itemsize, name,
                                             self.num_kv_heads * self.head_size)
        if token_stride and token_stride != stride:
            raise Error(INVALID_ARGUMENT, "%s_token_stride %d differs from %s's own token "
                        "stride of %d elements (a view of strides %s)" % (
                            name, token_stride, name, stride, strides))
        if offset:
            raise Error(INVALID_ARGUMENT, "%s_offset %d with %s a view of strides %s: its "
                        "tokens are the view's; slice the view instead" % (
                            name, offset, name, strides))
        if tokens < num_tokens:
            raise Error(BUFFER_TOO_SMALL, "%s holds %d tokens (a view of strides %s); "
                        "num_tokens is %d" % (name, tokens, strides, num_tokens))
        return stride, None

    def _check_input(self, num_tokens, name, reach, offset, token_stride):
        """Refuses an input array (its extent, reach; None: a buffer, which
        C checks) shorter than what C will read of it: num_tokens rows of a
        token's heads, token_stride apart (0: a row), from offset (counted
        from the array's own)."""
        row = self.num_kv_heads * self.head_size
        stride = token_stride or row
        needed = offset + (num_tokens - 1) * stride + row
        if reach is not None and reach < needed:  # the message only when refused
            holds(name, reach, needed, "num_tokens %d rows of %d elements, %d apart, from "
                  "%s_offset %d" % (num_tokens, row, stride, name, offset))

    @property
    def addressing(self) -> KVCacheAddressing:
        """Where the cache's elements are, as C resolved the config
        (clbt_kv_cache_get_addressing): key_offset and value_offset (from
        their buffers' starts), block_stride, page_stride, head_stride and
        tensor_span (the elements K, and V, spans from its offset)."""
        addressing = KVCacheAddressing()
        _check(lib.clbt_kv_cache_get_addressing(self._live(), byref(addressing)))
        if self._exchanged:  # the caller's K and V, not C's halves
            addressing.key_offset, addressing.value_offset = (addressing.value_offset,
                                                              addressing.key_offset)
        return addressing

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


def scale_values(scale: Any, name: str) -> np.ndarray:
    """A scale's values, flat, as float64: a number or an array of numbers
    (a device array is read, which waits for the queue). A string or a
    truth value, which float() and numpy would read as 1.0 ("1", True), is
    no scale: refused as a wrong type, naming it."""
    if hasattr(scale, "get") and hasattr(scale, "shape"):  # pyopencl.array.Array
        scale = scale.get()
    elif isinstance(scale, DeviceArray):
        scale = scale.numpy()
    values = None
    if not isinstance(scale, (str, bytes)):
        with contextlib.suppress(TypeError, ValueError):
            values = np.asarray(scale)
    if values is None or values.dtype.kind not in "fiu":
        raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; a number expected" % (
            name, _opencl.describe(scale)))
    return values.astype(np.float64).reshape(-1)


def as_float(scale: Any, name: str) -> float:
    """A scale that C may not read (the cache is not fp8 from another
    type) as the float its field holds: one number."""
    values = scale_values(scale, name)
    if values.size != 1:
        raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s of %d values; a number "
                                "expected" % (name, _opencl.describe(scale), values.size))
    return float(values[0])


def finite_scale(scale: Any, name: str) -> float:
    """A per-tensor scale as a float: a number, or an array of one element
    (a device array is read, which waits for the queue)."""
    values = scale_values(scale, name)
    if values.size != 1:
        raise Error(INVALID_ARGUMENT, "%s has %d elements; one per-tensor scale "
                    "expected (per-head scales are not supported)" % (name, values.size))
    value = float(values[0])
    if not math.isfinite(value) or value <= 0:
        raise Error(INVALID_ARGUMENT, "%s %r is not a finite value above 0" % (
            name, value))
    # C takes a float: a double past its range (1e39: infinity) or below
    # its least (1e-50: 0) is refused here, by its own name, where C would
    # name the scale of the half it fills (K's and V's are exchanged for a
    # cache whose V starts the shared buffer, _cache_ops.value_first).
    as_float32 = ctypes.c_float(value).value  # what the C struct holds; numpy warns
    if not math.isfinite(as_float32) or as_float32 <= 0:
        raise Error(INVALID_ARGUMENT, "%s %r is not a finite float32 above 0 (it is %r as "
                    "one)" % (name, value, as_float32))
    return value
