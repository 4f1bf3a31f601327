"""vLLM's cache op reshape_and_cache_flash (torch.ops._C_cache_ops) on
clbt: a layer's K and V written into its paged cache through a clbt.KVCache
described once per layout (_kv_cache.py). clbt.vllm exports it beside the
block tables, as vLLM's model code calls both.
"""
import threading

import numpy as np

from . import _core, _kv_cache, _opencl
from ._device_array import DeviceArray
from ._kv_cache import tensor_view
from ._errors import INVALID_ARGUMENT as _INVALID_ARGUMENT, Error, wrong_type as _wrong_type
from ._opencl import describe

# The caches reshape_and_cache_flash has described, by device and layout
# (a model's layers each have one), and the devices of the queues it met.
# Threads share them: the lock guards the dict, each cache's own lock its
# write. An evicted cache is dropped, not closed, so that a write another
# thread has fetched it for still runs; the last reference frees it.
_KV_CACHES = {}
_KV_CACHES_KEPT = 512
_KV_CACHES_LOCK = threading.Lock()
_QUEUE_DEVICES = {}


def _model_dtype(dtype, name):
    """The clbt_kv_dtype of K/V or a cache of the model's type: float32,
    float16, or 2-byte integers holding bf16 bits."""
    if dtype == np.float32:
        return "float32"
    if dtype == np.float16:
        return "float16"
    if dtype.itemsize == 2 and dtype.kind in "iu":
        return "bfloat16"
    raise _wrong_type("%s has dtype %s; float32, float16 or 16-bit bf16 bits (uint16) "
                      "expected" % (name, dtype))


def queue_device(array, device):
    """The clbt.Device of an array's queue (one per queue), or the one given."""
    if device is not None:
        return _core.shared_device(device)
    if isinstance(array, DeviceArray):
        queue = array._memory.queue
    else:
        queue = array.queue.int_ptr
    found = _QUEUE_DEVICES.get(queue)
    if found is None:
        found = _QUEUE_DEVICES[queue] = _core.Device(queue=_opencl.wrapped("queue", queue))
    return found


def cache_views(key_cache, value_cache, names=("key_cache", "value_cache")):
    """tensor_view's (handle, element offset, shape, strides, dtype) of a
    layer's K and V cache arrays, which must have one shape, strides and
    dtype ([num_blocks, block_size, num_kv_heads, head_size])."""
    k_view = tensor_view(key_cache, names[0], 4)
    v_view = tensor_view(value_cache, names[1], 4)
    if v_view[2:] != k_view[2:]:
        raise Error(_INVALID_ARGUMENT, "%s is %s %s with strides %s; %s's are %s %s with "
                    "strides %s" % ((names[1],) + v_view[4:] + v_view[2:4] + (names[0],)
                                    + k_view[4:] + k_view[2:4]))
    return k_view, v_view


def described_cache(owner, cache_name, input_name, k_view, v_view, exchanged):
    """The clbt.KVCache of a layer's cache views on a device (made on first
    sight, then found by its layout: the last 512 are kept)."""
    (k_handle, k_at, shape, strides, _), (v_handle, v_at) = k_view, v_view[:2]
    # What the config is made of: the described cache is found by it, and
    # the config made only the first time.
    layout = (owner._live(), cache_name, input_name, shape, strides, k_handle, k_at,
              v_handle, v_at)
    with _KV_CACHES_LOCK:
        cache = _KV_CACHES.get(layout)
        if cache is None:
            if len(_KV_CACHES) >= _KV_CACHES_KEPT:
                del _KV_CACHES[next(iter(_KV_CACHES))]
            config = cache_config(cache_name, input_name, shape, strides, k_handle, k_at,
                                   v_handle, v_at, exchanged)
            cache = _KV_CACHES[layout] = _kv_cache.KVCache.from_config(owner, config,
                                                                        exchanged)
    return cache


def _kv_cache_of(key, key_cache, value_cache, kv_cache_dtype, device):
    """The described cache of a layer's key_cache and value_cache (made on
    first sight, then found by its layout; described with K and V
    exchanged when value_first says so)."""
    k_view, v_view = cache_views(key_cache, value_cache)
    cache_type = k_view[4]
    input_name = _model_dtype(key.np_dtype if isinstance(key, DeviceArray) else key.dtype,
                              "key")
    if not isinstance(kv_cache_dtype, str):
        raise _wrong_type("kv_cache_dtype is %s; a str expected" % describe(kv_cache_dtype))
    if kv_cache_dtype.startswith("fp8"):
        if kv_cache_dtype not in ("fp8", "fp8_e4m3"):
            raise Error(_INVALID_ARGUMENT, "kv_cache_dtype %r: clbt's fp8 cache is e4m3fn "
                        "('fp8', 'fp8_e4m3')" % kv_cache_dtype)
        if cache_type.itemsize != 1:
            raise _wrong_type("key_cache has dtype %s; an fp8 cache holds 1-byte elements "
                              "(uint8)" % cache_type)
        cache_name = "fp8_e4m3"
    else:
        cache_name = _model_dtype(cache_type, "key_cache")
        if kv_cache_dtype not in ("auto", cache_name):
            raise Error(_INVALID_ARGUMENT, "kv_cache_dtype %r, but key_cache has dtype %s "
                        "(%s)" % (kv_cache_dtype, cache_type, cache_name))
        if input_name != cache_name:
            raise _wrong_type("key has dtype %s and key_cache %s: kv_cache_dtype %r writes "
                              "the model's type" % (key.dtype if not isinstance(
                                  key, DeviceArray) else key.np_dtype, cache_type,
                                                    kv_cache_dtype))
    exchanged = k_view[0] == v_view[0] and value_first(k_view[1], v_view[1])
    return described_cache(queue_device(key_cache, device), cache_name, input_name, k_view,
                           v_view, exchanged)


def cache_config(cache_name, input_name, shape, strides, k_handle, k_at, v_handle, v_at,
                  exchanged):
    """The clbt_kv_cache_config of a layer's cache arrays: K's half at
    key_offset, V's at value_offset (exchanged: the other way round)."""
    num_blocks, block_size, heads, head_size = shape
    one_buffer = k_handle == v_handle
    if exchanged:
        k_at, v_at = v_at, k_at
    return _kv_cache.KVCacheConfig(
        layout=0, cache_dtype=_kv_cache.DTYPES[cache_name],
        input_dtype=_kv_cache.DTYPES[input_name], num_kv_heads=heads, head_size=head_size,
        block_size=block_size, num_blocks=num_blocks, key_cache=k_handle,
        value_cache=None if one_buffer else v_handle, key_offset=k_at, value_offset=v_at,
        block_stride=strides[0], page_stride=strides[1], head_stride=strides[2])


def value_first(key_at, value_at):
    """Whether a cache of one buffer must be described with K and V
    exchanged: when V starts at element 0. C reads a value_offset of 0 in
    one buffer as "K's offset plus one block" (clbt_kv_cache_config), even
    with value_cache given as the same buffer, so V at 0 is described as
    the K half, at key_offset 0, which C takes literally; the write
    exchanges the inputs and scales to match. The cache write treats K and
    V alike, so nothing else changes. Both at 0 would be one set of
    elements: refused."""
    if value_at:
        return False
    if not key_at:
        raise Error(_INVALID_ARGUMENT, "key_cache and value_cache both start at element 0 "
                    "of one buffer, with one shape and strides: they are the same elements")
    return True


def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype,
                            k_scale, v_scale, *, device=None):
    """vLLM's reshape_and_cache_flash (torch.ops._C_cache_ops) on OpenCL:
    token t of key and value ([num_tokens, num_kv_heads, head_size] device
    arrays, any token stride) to slot slot_mapping[t] (int64; its length
    is num_tokens, as vLLM's) of key_cache and value_cache ([num_blocks,
    block_size, num_kv_heads, head_size] views of any strides: the flash
    layout, or a permuted head-major one; one buffer for both, as
    kv_cache[:, 0] and kv_cache[:, 1], or two). kv_cache_dtype "auto" (the
    model's type; bf16 as uint16 bits) or "fp8" (uint8 caches of e4m3fn:
    K / k_scale and V / v_scale, per-tensor scales, saturated at 448).
    Arrays are pyopencl.array.Array or clbt.DeviceArray; the device is
    their queue's (or device=). The cache of each layout is described once
    and kept (the last 512); the write is one launch, enqueued without
    waiting (a device-array scale is read first, which waits)."""
    # key first: _kv_cache_of reads its dtype, which a non-array lacks.
    k_handle, k_at, k_shape, k_strides, k_type = tensor_view(key, "key", 3)
    cache = _kv_cache_of(key, key_cache, value_cache, kv_cache_dtype, device)
    v_handle, v_at, v_shape, v_strides, v_type = tensor_view(value, "value", 3)
    s_handle, s_at, s_shape, s_strides, s_type = tensor_view(slot_mapping, "slot_mapping", 1)
    if s_type != np.int64:
        raise _wrong_type("slot_mapping has dtype %s; int64 expected" % s_type)
    if v_type != k_type:
        raise _wrong_type("value has dtype %s; key's is %s" % (v_type, k_type))
    num_tokens = s_shape[0]
    for name, shape, strides in (("key", k_shape, k_strides), ("value", v_shape, v_strides)):
        if shape[1:] != (cache.num_kv_heads, cache.head_size):
            raise Error(_INVALID_ARGUMENT, "%s has shape %s; key_cache's heads are [%d, %d]"
                        % (name, shape, cache.num_kv_heads, cache.head_size))
        if shape[1] > 1 and strides[1] != shape[2]:
            raise Error(_INVALID_ARGUMENT, "%s has strides %s; a token's heads must be "
                        "contiguous" % (name, strides))
        if shape[0] < num_tokens:
            raise Error(_INVALID_ARGUMENT, "%s holds %d tokens; slot_mapping has %d" % (
                name, shape[0], num_tokens))
    fp8 = cache.cache_dtype == _kv_cache.DTYPES["fp8_e4m3"]
    scales = {"k_scale": 1.0, "v_scale": 1.0}
    if fp8:
        scales = {"k_scale": _kv_cache.finite_scale(k_scale, "k_scale"),
                  "v_scale": _kv_cache.finite_scale(v_scale, "v_scale")}
    row = cache.num_kv_heads * cache.head_size
    (k_handle, k_at, k_stride, k_scale), (v_handle, v_at, v_stride, v_scale) = \
        cache._in_c_order(
            (k_handle, k_at, k_strides[0] if k_shape[0] > 1 else row, scales["k_scale"]),
            (v_handle, v_at, v_strides[0] if v_shape[0] > 1 else row, scales["v_scale"]))
    write = _kv_cache.KVWrite(num_tokens=num_tokens, key=k_handle, value=v_handle,
                              slot_mapping=s_handle, key_offset=k_at, key_token_stride=k_stride,
                              value_offset=v_at, value_token_stride=v_stride,
                              slot_mapping_offset=s_at, k_scale=k_scale, v_scale=v_scale)
    with cache._lock:  # the cache's one kernel takes each write's arguments
        _kv_cache.enqueue_write(cache, write, 0, None, None)
