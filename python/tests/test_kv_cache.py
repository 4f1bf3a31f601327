"""The KV-cache write from Python: clbt.KVCache on device arrays and
buffers, and clbt.vllm.reshape_and_cache_flash on arrays shaped as vLLM's
test_cache.py shapes them (kv_cache[:, 0] / [:, 1] of one FlashInfer
tensor, NHD and a permuted HND, key and value views of a qkv tensor),
against numpy: each cache is poisoned, written, and compared whole with
the same write done by numpy indexing. fp16 is numpy's float16 conversion;
bf16 and fp8 e4m3fn are rounded by their definitions (formats.py).
Refused calls raise a clbt.Error naming the argument and write nothing."""
import numpy as np
import pytest

import clbt
import clbt.vllm
from clbt import _opencl
from clbt._device_array import DeviceArray, Memory
from clbt._library import lib
from formats import from_bf16, to_bf16, to_e4m3

POISON = 0x5A


def convert(x, cache, scale):
    """K/V as float32 values written to a cache type's elements."""
    if cache == "float16":
        return x.astype(np.float16)
    if cache == "bfloat16":
        return to_bf16(x)
    return to_e4m3(x.astype(np.float32) / np.float32(scale))


# ---- device arrays made with the package's own calls ---------------------

class Arrays:
    """Device buffers holding host arrays, and DeviceArray views of them."""

    def __init__(self, device):
        self.device = device
        self.context = lib.clbt_device_context(device._live())
        self.queue = lib.clbt_device_queue(device._live())
        self.buffers = []

    def upload(self, values):
        values = np.ascontiguousarray(values)
        buffer = _opencl.create_buffer(self.context, values.nbytes)
        self.buffers.append(buffer)
        _opencl.write(self.queue, buffer.int_ptr, values.ctypes.data, values.nbytes).wait()
        return buffer, values

    def array(self, values, shape=None, strides=None, offset=0):
        """A DeviceArray of values (or a view of them: shape, byte strides
        and offset)."""
        buffer, values = self.upload(values)
        memory = Memory(buffer.int_ptr, self.queue, values.nbytes)
        return DeviceArray(memory, values.shape if shape is None else shape, values.dtype,
                           strides, offset), buffer, values

    def read(self, buffer, like):
        return _opencl.read(self.queue, buffer.int_ptr, np.empty_like(like))

    def release(self):
        for buffer in self.buffers:
            buffer.close()


@pytest.fixture
def arrays(device):
    made = Arrays(device)
    yield made
    made.release()


def kv_inputs(rng, num_tokens, heads, head_size, dtype):
    """A qkv tensor [t, 3, h, d] of normal values, as float32 and in dtype
    ("float16": numpy's; "bfloat16": bits), and the slots: distinct ones,
    with -1 and one past the cache."""
    qkv = rng.standard_normal((num_tokens, 3, heads, head_size)).astype(np.float32)
    if dtype == "float16":
        stored = qkv.astype(np.float16)
        qkv = stored.astype(np.float32)
    elif dtype == "bfloat16":
        stored = to_bf16(qkv)
        qkv = from_bf16(stored)
    else:
        stored = qkv
    return qkv, stored


def slots_for(rng, num_tokens, num_slots):
    slots = rng.choice(num_slots, num_tokens, replace=False).astype(np.int64)
    slots[1] = -1
    slots[3] = num_slots + 3
    return slots


def reference(kv_cache, layout, values, slots, cache_dtype, scales):
    """numpy's write into a copy of a [nb, 2, ...] cache of raw elements."""
    expected = kv_cache.copy()
    block_size = kv_cache.shape[2] if layout == "flash" else kv_cache.shape[3]
    num_slots = kv_cache.shape[0] * block_size
    for t, slot in enumerate(slots):
        if slot < 0 or slot >= num_slots:
            continue
        b, p = divmod(int(slot), block_size)
        for kv in range(2):
            row = convert(values[t, 1 + kv], cache_dtype, scales[kv])
            if cache_dtype != "float16":
                row = row.view(expected.dtype)
            if layout == "flash":
                expected[b, kv, p] = row
            else:
                expected[b, kv, :, p] = row
    return expected


# ---- clbt.vllm.reshape_and_cache_flash ------------------------------------

CASES = [
    # num_tokens, heads, head_size, block_size, num_blocks, model dtype, cache, layout
    (21, 8, 64, 16, 12, "float16", "auto", "flash"),
    (21, 4, 80, 32, 6, "float16", "auto", "head_major"),
    (21, 8, 128, 16, 8, "bfloat16", "auto", "flash"),
    (21, 2, 256, 64, 3, "bfloat16", "fp8", "head_major"),
    (21, 8, 64, 16, 12, "float16", "fp8", "flash"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_reshape_and_cache_flash_matches_numpy(arrays, case):
    num_tokens, heads, head_size, block_size, num_blocks, dtype, kv_cache_dtype, layout = case
    rng = np.random.default_rng(sum(case[:5]))
    qkv, stored = kv_inputs(rng, num_tokens, heads, head_size, dtype)
    fp8 = kv_cache_dtype == "fp8"
    element = np.uint8 if fp8 else stored.dtype
    # FlashInfer's kv_cache: [nb, 2, B, H, D] (NHD) or [nb, 2, H, B, D] (HND).
    shape = (num_blocks, 2, block_size, heads, head_size) if layout == "flash" else \
        (num_blocks, 2, heads, block_size, head_size)
    kv_cache = np.frombuffer(np.full(int(np.prod(shape)) * np.dtype(element).itemsize, POISON,
                                     np.uint8).tobytes(), element).reshape(shape).copy()
    kv, kv_buffer, _ = arrays.array(kv_cache)
    strides = kv._strides
    if layout == "flash":
        view_shape = (num_blocks, block_size, heads, head_size)
        view_strides = (strides[0], strides[2], strides[3], strides[4])
    else:  # kv_cache[:, i].permute(0, 2, 1, 3): HND storage seen as NHD
        view_shape = (num_blocks, block_size, heads, head_size)
        view_strides = (strides[0], strides[3], strides[2], strides[4])
    key_cache = DeviceArray(kv._memory, view_shape, element, view_strides, 0)
    value_cache = DeviceArray(kv._memory, view_shape, element, view_strides, strides[1])
    qkv_array, _, _ = arrays.array(stored)
    q_strides = qkv_array._strides
    row = heads * head_size
    key = DeviceArray(qkv_array._memory, (num_tokens, heads, head_size), stored.dtype,
                      (q_strides[0], q_strides[2], q_strides[3]), row * stored.itemsize)
    value = DeviceArray(qkv_array._memory, (num_tokens, heads, head_size), stored.dtype,
                        (q_strides[0], q_strides[2], q_strides[3]), 2 * row * stored.itemsize)
    slots = slots_for(rng, num_tokens, num_blocks * block_size)
    slot_array, _, _ = arrays.array(slots)
    # vLLM's test: k_scale = key.amax() / 64.
    scales = (float(qkv[:, 1].max()) / 64.0, float(qkv[:, 2].max()) / 64.0)
    cache = "float16" if dtype == "float16" and not fp8 else \
        "bfloat16" if not fp8 else "fp8_e4m3"
    clbt.vllm.reshape_and_cache_flash(key, value, key_cache, value_cache, slot_array,
                                      kv_cache_dtype, np.float32(scales[0]),
                                      np.array([scales[1]], np.float32))
    got = arrays.read(kv_buffer, kv_cache)
    expected = reference(kv_cache, layout, qkv, slots, cache, scales)
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), \
        "%d of %d bytes differ" % (np.count_nonzero(got.view(np.uint8) !=
                                                    expected.view(np.uint8)), got.nbytes)
    kv_cache_object = next(reversed(clbt._cache_ops._KV_CACHES.values()))
    assert kv_cache_object.rejected_tokens == 1


def test_kv_cache_class_on_buffers_with_offsets(arrays, device):
    """KVCache on plain buffers: two fp32 caches of head-major padded pages
    (strides given), inputs at element offsets with a token stride."""
    rng = np.random.default_rng(5)
    heads, head_size, block_size, num_blocks, num_tokens = 2, 64, 16, 4, 10
    page = head_size + 4
    head_stride, block_stride = page * block_size, page * block_size * heads
    caches = [np.full(block_stride * num_blocks, np.float32(-7.0)) for _ in range(2)]
    buffers = [arrays.upload(c)[0] for c in caches]
    x = rng.standard_normal((num_tokens * 3 * heads * head_size + 5,)).astype(np.float32)
    x_buffer, _ = arrays.upload(x)
    slots = slots_for(rng, num_tokens, num_blocks * block_size)
    s_buffer, _ = arrays.upload(slots)
    with clbt.KVCache(device, clbt.Buffer.from_int_ptr(buffers[0].int_ptr),
                      clbt.Buffer.from_int_ptr(buffers[1].int_ptr), num_kv_heads=heads,
                      head_size=head_size, block_size=block_size, num_blocks=num_blocks,
                      cache_dtype="float32", layout="head_major", page_stride=page,
                      head_stride=head_stride, block_stride=block_stride) as cache:
        buffer = clbt.Buffer.from_int_ptr(x_buffer.int_ptr)
        event = cache.write(buffer, buffer, clbt.Buffer.from_int_ptr(s_buffer.int_ptr),
                            num_tokens, key_offset=5, value_offset=5 + heads * head_size,
                            key_token_stride=3 * heads * head_size,
                            value_token_stride=3 * heads * head_size, event=True)
        event.wait()
        assert cache.rejected_tokens == 1
        cache.reset_rejected_tokens()
        assert cache.rejected_tokens == 0
    for kv in range(2):
        expected = caches[kv].copy()
        for t, slot in enumerate(slots):
            if 0 <= slot < num_blocks * block_size:
                b, p = divmod(int(slot), block_size)
                for h in range(heads):
                    at = 5 + t * 3 * heads * head_size + (kv * heads + h) * head_size
                    start = b * block_stride + h * head_stride + p * page
                    expected[start:start + head_size] = x[at:at + head_size]
        assert np.array_equal(arrays.read(buffers[kv], caches[kv]), expected)


@pytest.mark.parametrize("change, words", [
    (dict(slot_dtype=np.int32), "slot_mapping has dtype int32; int64 expected"),
    (dict(kv_cache_dtype="fp8_e5m2"), "kv_cache_dtype 'fp8_e5m2'"),
    (dict(kv_cache_dtype="bfloat16"), "kv_cache_dtype 'bfloat16', but key_cache has dtype "
                                      "float16"),
    (dict(kv_cache_dtype="fp8", k_scale=0.0), "k_scale 0.0 is not a finite value above 0"),
    (dict(kv_cache_dtype="fp8", v_scale=np.array([1.0, 2.0])), "v_scale has 2 elements"),
    (dict(heads=2), "key has shape (4, 2, 32); key_cache's heads are [4, 16]"),
    (dict(key_dtype=np.float32), "key has dtype float32 and key_cache float16"),
    (dict(tokens=3), "key holds 3 tokens; slot_mapping has 4"),
    (dict(value_strides=True), "value_cache is float16 (2, 4, 4, 16) with strides"),
    (dict(value_at=0), "key_cache and value_cache both start at element 0 of one buffer"),
    (dict(key_cache_at=1), "key_cache starts 1 bytes into its buffer, not a whole number of "
                           "2-byte elements"),
    (dict(key_at=3), "key starts 3 bytes into its buffer, not a whole number of 2-byte"),
    (dict(slot_at=4), "slot_mapping starts 4 bytes into its buffer, not a whole number of "
                      "8-byte elements"),
    (dict(slots=[0, 1, 2, 32]), None),  # not refused: counted
])
def test_refused_writes_name_the_argument_and_write_nothing(arrays, change, words):
    heads, head_size, block_size, num_blocks = 4, 16, 4, 2
    fp8 = change.get("kv_cache_dtype", "").startswith("fp8")
    element = np.uint8 if fp8 else np.float16
    kv_cache = np.frombuffer(np.full(num_blocks * 2 * block_size * heads * head_size *
                                     np.dtype(element).itemsize, POISON, np.uint8).tobytes(),
                             element).reshape(num_blocks, 2, block_size, heads, head_size)
    kv, kv_buffer, _ = arrays.array(kv_cache.copy())
    s = kv._strides
    key_cache = DeviceArray(kv._memory, (num_blocks, block_size, heads, head_size), element,
                            (s[0], s[2], s[3], s[4]), change.get("key_cache_at", 0))
    value_strides = (s[0], s[2], s[3], s[4]) if not change.get("value_strides") else \
        (s[0] // 2, s[2], s[3], s[4])
    value_cache = DeviceArray(kv._memory, (num_blocks, block_size, heads, head_size), element,
                              value_strides, change.get("value_at", s[1]))
    k_heads = change.get("heads", heads)
    tokens = change.get("tokens", 4)
    k_type = change.get("key_dtype", np.float16)
    key_shape = (tokens, k_heads, heads * head_size // k_heads)
    key, _, _ = arrays.array(np.ones((tokens + 1,) + key_shape[1:], k_type), key_shape, None,
                             change.get("key_at", 0))
    value, _, _ = arrays.array(np.ones((tokens, k_heads, heads * head_size // k_heads),
                                       k_type))
    slot_values = np.array(change.get("slots", [0, 1, 2, 3]) + [0],
                           change.get("slot_dtype", np.int64))
    slots, _, _ = arrays.array(slot_values, (slot_values.size - 1,), None,
                               change.get("slot_at", 0))
    call = lambda: clbt.vllm.reshape_and_cache_flash(  # noqa: E731
        key, value, key_cache, value_cache, slots, change.get("kv_cache_dtype", "auto"),
        change.get("k_scale", 1.0), change.get("v_scale", 1.0))
    if words is None:
        call()
        written = arrays.read(kv_buffer, kv_cache).view(np.uint8)
        assert np.count_nonzero(written != POISON) > 0
        return
    with pytest.raises(clbt.Error) as raised:
        call()
    assert words in str(raised.value)
    assert np.all(arrays.read(kv_buffer, kv_cache).view(np.uint8) == POISON)


def test_kv_write_on_pyopencl_arrays(device):
    """PyOpenCL arrays, as a PyOpenCL engine holds them: a transposed view
    for the head-major cache, a sliced qkv tensor for K and V."""
    pyopencl = pytest.importorskip("pyopencl")
    import pyopencl.array as cl_array
    queue = device.queue
    rng = np.random.default_rng(11)
    num_tokens, heads, head_size, block_size, num_blocks = 9, 4, 64, 16, 4
    qkv = rng.standard_normal((num_tokens, 3, heads, head_size)).astype(np.float16)
    kv_host = np.full((num_blocks, 2, heads, block_size, head_size), np.float16(-3.0))
    kv = cl_array.to_device(queue, kv_host)
    qkv_device = cl_array.to_device(queue, qkv)
    slots = slots_for(rng, num_tokens, num_blocks * block_size)
    key_cache = kv[:, 0].transpose((0, 2, 1, 3))
    value_cache = kv[:, 1].transpose((0, 2, 1, 3))
    clbt.vllm.reshape_and_cache_flash(qkv_device[:, 1], qkv_device[:, 2], key_cache,
                                      value_cache, cl_array.to_device(queue, slots), "auto",
                                      1.0, 1.0)
    expected = reference(kv_host, "head_major", qkv.astype(np.float32), slots, "float16",
                         (1.0, 1.0))
    assert np.array_equal(kv.get(), expected)
    assert isinstance(pyopencl.array.Array, type)


def test_kv_cache_refuses_arrays_shorter_than_what_it_reaches(device):
    """An Array's own extent (elements from its offset to its last one's
    end) bounds the cache and the write's inputs, not only its buffer: one
    head of 4, block_size 1, K and V in one buffer, so a block is 8
    elements and num_blocks n needs 8 n of the cache's."""
    cl_array = pytest.importorskip("pyopencl.array")
    queue = device.queue
    whole = cl_array.to_device(queue, np.full(64, -7.0, np.float32))
    shape = dict(num_kv_heads=1, head_size=4, block_size=1, cache_dtype="float32")
    with pytest.raises(clbt.InvalidArgumentError) as refused:
        clbt.KVCache(device, whole[:16], num_blocks=8, **shape)
    assert refused.value.status == "CLBT_BUFFER_TOO_SMALL"
    assert refused.value.message.startswith("key_cache holds 16 values;") and \
        refused.value.message.endswith("needs 64")
    view = DeviceArray(Memory(whole.base_data.int_ptr, queue.int_ptr, whole.nbytes), (16,),
                       np.float32, None, 8 * 4)  # elements 8 .. 23
    with pytest.raises(clbt.InvalidArgumentError) as refused:
        clbt.KVCache(device, view, num_blocks=3, **shape)
    assert refused.value.message.startswith("key_cache holds 16 values;") and \
        refused.value.message.endswith("needs 24")
    key_whole = cl_array.to_device(queue, np.arange(8, dtype=np.float32))
    slots_whole = cl_array.to_device(queue, np.array([1, 0], np.int64))
    with clbt.KVCache(device, whole[:16], num_blocks=2, **shape) as cache:
        for call, words in [
                (lambda: cache.write(key_whole[:2], key_whole, slots_whole[:1]),
                 "key holds 2 values; num_tokens 1 rows of 4 elements, 4 apart, from "
                 "key_offset 0 needs 4"),
                (lambda: cache.write(key_whole, key_whole[:6], slots_whole, 2),
                 "value holds 6 values; num_tokens 2 rows of 4 elements, 4 apart, from "
                 "value_offset 0 needs 8"),
                (lambda: cache.write(key_whole, key_whole, slots_whole[:1], 2),
                 "slot_mapping holds 1 values; num_tokens 2 from slot_mapping_offset 0 "
                 "needs 2"),
                (lambda: cache.write(key_whole, key_whole, slots_whole[:1], 1,
                                     slot_mapping_offset=1),
                 "slot_mapping holds 1 values; num_tokens 1 from slot_mapping_offset 1 "
                 "needs 2")]:
            with pytest.raises(clbt.InvalidArgumentError) as refused:
                call()
            assert refused.value.status == "CLBT_BUFFER_TOO_SMALL"
            assert refused.value.message == words
        device.finish()
        assert whole.get().tolist() == [-7.0] * 64  # nothing written
        # Two tokens to slots 1 and 0: K then V of block 1, then of block 0.
        cache.write(key_whole, key_whole, slots_whole, key_token_stride=4,
                    value_token_stride=4)
        device.finish()
        assert whole.get().tolist() == [4, 5, 6, 7, 4, 5, 6, 7, 0, 1, 2, 3, 0, 1, 2, 3] + \
            [-7.0] * 48


def test_kv_cache_on_strided_views_of_one_tensor(device):
    """kv[:, 0] and kv[:, 1] of one [blocks, 2, block_size, heads, head]
    tensor (FlashInfer's) reach exactly their last block: accepted. Their
    addressing, by hand: K at element 0 and V at 8 (kv[:, 1]'s offset),
    blocks 16 apart (given), slots and heads 4 (the flash layout's), and
    a tensor spans 2 blocks + 1 slot + 4 elements = 40."""
    cl_array = pytest.importorskip("pyopencl.array")
    queue = device.queue
    kv = cl_array.to_device(queue, np.full((3, 2, 2, 1, 4), -7.0, np.float32))
    key = cl_array.to_device(queue, np.array([1, 2, 3, 4], np.float32))
    value = cl_array.to_device(queue, np.array([5, 6, 7, 8], np.float32))
    with clbt.KVCache(device, kv[:, 0], kv[:, 1], num_kv_heads=1, head_size=4, block_size=2,
                      num_blocks=3, cache_dtype="float32", block_stride=16) as cache:
        a = cache.addressing
        assert (a.key_offset, a.value_offset, a.block_stride, a.page_stride, a.head_stride,
                a.tensor_span) == (0, 8, 16, 4, 4, 40)
        cache.write(key, value, cl_array.to_device(queue, np.array([5], np.int64)))
        device.finish()
    with pytest.raises(clbt.InvalidArgumentError, match="closed"):
        cache.addressing
    expected = np.full((3, 2, 2, 1, 4), -7.0, np.float32)
    # slot 5: block 2, page 1
    expected[2, 0, 1, 0], expected[2, 1, 1, 0] = [1, 2, 3, 4], [5, 6, 7, 8]
    assert np.array_equal(kv.get(), expected)


def test_offsets_past_64_bits_with_an_arrays_own_are_refused(device):
    """An Array's own offset plus the offset given must fit C's uint64, as
    key_offset alone must: 4 (cache_buf[4:]'s) + 2**64 - 4 is 2**64, which
    wrapped to 0, so K went to element 0, before the Array. Refused with
    C's status for a sum past 64 bits, naming the offset; nothing written."""
    cl_array = pytest.importorskip("pyopencl.array")
    queue = device.queue
    cache_buf = cl_array.to_device(queue, np.full(36, -7.0, np.float32))
    shape = dict(num_kv_heads=1, head_size=4, block_size=2, num_blocks=2,
                 cache_dtype="float32")
    for kwargs, name in [(dict(key_offset=2**64 - 4), "key_offset"),
                         (dict(value_cache=cache_buf[4:], value_offset=2**64 - 4),
                          "value_offset")]:
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            clbt.KVCache(device, cache_buf[4:], **shape, **kwargs)
        assert refused.value.status == "CLBT_SIZE_OVERFLOW"
        assert refused.value.message.startswith("%s %d plus " % (name, 2**64 - 4))
    key = cl_array.to_device(queue, np.full(8, 1.5, np.float32))
    slots = cl_array.to_device(queue, np.array([3, 0], np.int64))
    with clbt.KVCache(device, cache_buf, **shape) as cache:
        for kwargs, name in [(dict(key_offset=2**64 - 1), "key_offset"),
                             (dict(value_offset=2**64 - 1), "value_offset"),
                             (dict(slot_mapping_offset=2**64 - 1), "slot_mapping_offset")]:
            with pytest.raises(clbt.InvalidArgumentError) as refused:
                cache.write(key[4:], key[4:], slots[1:], 1, **kwargs)
            assert refused.value.status == "CLBT_SIZE_OVERFLOW"
            assert refused.value.message.startswith("%s %d plus " % (name, 2**64 - 1))
    device.finish()
    assert cache_buf.get().tolist() == [-7.0] * 36


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
@pytest.mark.parametrize("spare", [0, 1], ids=["exact", "spare-block"])
def test_values_at_the_start_of_the_shared_buffer(arrays, kv_cache_dtype, spare):
    # kv[:, 1] as key_cache and kv[:, 0] as value_cache: V starts at
    # element 0 of the buffer K shares. Both caches get their own tokens
    # and nothing else (a spare block after the cache stays poisoned).
    num_tokens, heads, head_size, block_size, num_blocks = 6, 2, 16, 4, 3
    rng = np.random.default_rng(7)
    qkv, stored = kv_inputs(rng, num_tokens, heads, head_size, "float16")
    fp8 = kv_cache_dtype == "fp8"
    element = np.uint8 if fp8 else np.float16
    shape = (num_blocks + spare, 2, block_size, heads, head_size)
    kv_cache = np.frombuffer(np.full(int(np.prod(shape)) * np.dtype(element).itemsize, POISON,
                                     np.uint8).tobytes(), element).reshape(shape).copy()
    kv, kv_buffer, _ = arrays.array(kv_cache)
    s = kv._strides
    view = ((num_blocks, block_size, heads, head_size), element, (s[0], s[2], s[3], s[4]))
    key_cache = DeviceArray(kv._memory, *view, s[1])
    value_cache = DeviceArray(kv._memory, *view, 0)
    qkv_array, _, _ = arrays.array(stored)
    q = qkv_array._strides
    row = heads * head_size
    key, value = (DeviceArray(qkv_array._memory, (num_tokens, heads, head_size), stored.dtype,
                              (q[0], q[2], q[3]), (1 + kv) * row * stored.itemsize)
                  for kv in range(2))
    slots = np.array([0, 11, 5, -1, 6, 2], np.int64)  # blocks 0 2 1, -, 1 0
    slot_array, _, _ = arrays.array(slots)
    scales = (0.5, 2.0)  # distinct: a K/V mix-up of the fp8 scales shows
    clbt.vllm.reshape_and_cache_flash(key, value, key_cache, value_cache, slot_array,
                                      kv_cache_dtype, scales[0], scales[1])
    got = arrays.read(kv_buffer, kv_cache)
    # numpy's write puts K in [:, 0] and V in [:, 1]: done on the cache
    # with its two halves exchanged, then exchanged back.
    expected = reference(kv_cache[:, ::-1].copy(), "flash", qkv, slots,
                         "fp8_e4m3" if fp8 else "float16", scales)[:, ::-1]
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), \
        "%d of %d bytes differ" % (np.count_nonzero(got.view(np.uint8) !=
                                                    expected.view(np.uint8)), got.nbytes)


def test_a_layout_is_described_once_and_each_change_is_another(arrays):
    # The facade finds a layer's described cache by what its config is
    # made of: the same arrays again find it; the halves exchanged, the
    # first block alone, the same storage as uint16 (bf16 bits) or as fp8
    # bytes each describe a cache of their own.
    heads, head_size, block_size, num_blocks = 2, 4, 4, 2
    kv, _, _ = arrays.array(np.zeros((num_blocks, 2, block_size, heads, head_size),
                                     np.float16))
    s = kv._strides
    nhd = ((num_blocks, block_size, heads, head_size), np.float16, (s[0], s[2], s[3], s[4]))
    one_block = ((1, block_size, heads, head_size), np.float16, nhd[2])
    halves = [DeviceArray(kv._memory, *nhd, 0), DeviceArray(kv._memory, *nhd, s[1])]
    inputs, _, _ = arrays.array(np.zeros((1, heads, head_size), np.float16))
    slots, _, _ = arrays.array(np.array([-1], np.int64))

    def write(key_cache, value_cache, kv_cache_dtype="auto", key=inputs):
        before = dict(clbt._cache_ops._KV_CACHES)
        clbt.vllm.reshape_and_cache_flash(key, key, key_cache, value_cache, slots,
                                          kv_cache_dtype, 1.0, 1.0)
        return [c for k, c in clbt._cache_ops._KV_CACHES.items() if k not in before]

    first = write(*halves)
    assert len(first) <= 1  # made now, or by an earlier test of the same layout
    assert write(*halves) == []
    assert len(write(halves[1], halves[0])) == 1
    assert len(write(DeviceArray(kv._memory, *one_block, 0),
                     DeviceArray(kv._memory, *one_block, s[1]))) == 1
    as_bits = [DeviceArray(kv._memory, nhd[0], np.uint16, nhd[2], at) for at in (0, s[1])]
    bits_in, _, _ = arrays.array(np.zeros((1, heads, head_size), np.uint16))
    assert len(write(*as_bits, key=bits_in)) == 1
    as_bytes = [DeviceArray(kv._memory, nhd[0], np.uint8, (s[0], s[2], s[3], 1), at)
                for at in (0, s[1])]
    assert len(write(*as_bytes, kv_cache_dtype="fp8")) == 1
    assert write(*as_bytes, kv_cache_dtype="fp8") == []


def _one_buffer_cache(arrays, num_blocks, block_size, heads, head_size, block_stride=None):
    """kv[:, 0] and kv[:, 1] of a poisoned float32 [num_blocks, 2, ...]
    tensor, as key_cache and value_cache views of block_stride bytes
    between blocks (None: the tensor's)."""
    kv_cache = np.full((num_blocks, 2, block_size, heads, head_size), -7.0, np.float32)
    kv, kv_buffer, _ = arrays.array(kv_cache)
    s = kv._strides
    strides = (s[0] if block_stride is None else block_stride, s[2], s[3], s[4])
    view = ((num_blocks, block_size, heads, head_size), np.float32, strides)
    return (DeviceArray(kv._memory, *view, 0), DeviceArray(kv._memory, *view, s[1]),
            kv_buffer, kv_cache)


def test_token_stride_of_0_is_refused_not_read_as_a_row(arrays):
    # key [3, 1, 4] with a token stride of 0 (an expanded row: its one row
    # is every token's) over a buffer of 3 rows. C's 0 means "a row", so
    # passed on it read rows 1 and 2, past the array's one row, and wrote
    # them. clbt cannot read one row for several tokens: refused, naming
    # the array and its strides; nothing written.
    key, _, _ = arrays.array(np.arange(12, dtype=np.float32).reshape(3, 1, 4), (3, 1, 4),
                             (0, 16, 4))
    value, _, _ = arrays.array(np.zeros((3, 1, 4), np.float32))
    key_cache, value_cache, kv_buffer, kv_cache = _one_buffer_cache(arrays, 2, 2, 1, 4)
    slots, _, _ = arrays.array(np.array([0, 1, 2], np.int64))
    for k, v, name in [(key, value, "key"), (value, key, "value")]:
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            clbt.vllm.reshape_and_cache_flash(k, v, key_cache, value_cache, slots, "auto",
                                              1.0, 1.0)
        assert refused.value.status == "CLBT_INVALID_ARGUMENT"
        assert refused.value.message.startswith("%s has strides (0, 4, 1)" % name)
    assert np.all(arrays.read(kv_buffer, kv_cache) == -7.0)


def test_cache_strides_of_0_or_below_are_refused(arrays):
    # key_cache and value_cache of 2 blocks with a block stride of 0 (both
    # blocks at one address), negative (kv[::-1, 0]), or of 66 bytes
    # (16.5 floats), over a buffer of 4 blocks. C's 0 means "the
    # layout's", so passed on, the 0 stride put slot 3 (block 1) in the
    # buffer's block 1, past the arrays' one block; a negative one wrapped
    # to a stride past 2^63, refused only for an overflow; 66 bytes were
    # taken for 16 floats, and block 1 written 2 bytes before the array's.
    # All refused, naming the array; nothing written.
    key, _, _ = arrays.array(np.arange(4, dtype=np.float32).reshape(1, 1, 4))
    slots, _, _ = arrays.array(np.array([3], np.int64))
    for block_stride, words in [(0, "key_cache has strides (0, 4, 4, 1)"),
                                (-64, "key_cache has strides (-16, 4, 4, 1)"),
                                (66, "key_cache has byte strides (66, 16, 16, 4); each "
                                     "must be a whole number of its 4-byte elements")]:
        key_cache, value_cache, kv_buffer, kv_cache = _one_buffer_cache(arrays, 4, 2, 1, 4)
        s = key_cache._strides
        view = ((2, 2, 1, 4), np.float32, (block_stride,) + s[1:])
        start = 0 if block_stride >= 0 else 64
        key_half = DeviceArray(key_cache._memory, *view, start)
        value_half = DeviceArray(key_cache._memory, *view, start + 32)
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            clbt.vllm.reshape_and_cache_flash(key, key, key_half, value_half, slots, "auto",
                                              1.0, 1.0)
        assert refused.value.status == "CLBT_INVALID_ARGUMENT"
        assert refused.value.message.startswith(words), refused.value.message
        assert np.all(arrays.read(kv_buffer, kv_cache) == -7.0)


@pytest.mark.parametrize("cache_dtype", ["float32", "fp8_e4m3"])
def test_kv_cache_class_with_values_at_the_start_of_the_shared_buffer(arrays, device,
                                                                      cache_dtype):
    # KVCache(key_cache=flat[4:], value_cache=flat): K from element 4 and
    # V from element 0 of one buffer of 4 blocks [2][1 slot][1 head][4],
    # the cache its first 3 (block stride 8). C reads a value_offset of 0
    # in one buffer as "one block after K", so V went to element 8, block
    # 1's. By hand: slot 0 puts K at 4..7 and V at 0..3, slot 2 K at
    # 20..23 and V at 16..19. fp8 from float32 divides K by k_scale 0.5 and
    # V by v_scale 2 (distinct, so that a mix-up shows): K 2 4 6 8 are the
    # e4m3 codes 0x40 0x48 0x4c 0x50, V 2.5 3 3.5 4 are 0x42 0x44 0x46 0x48.
    fp8 = cache_dtype == "fp8_e4m3"
    element = np.uint8 if fp8 else np.float32
    flat, flat_buffer, poisoned = arrays.array(np.full(32, 0x5A if fp8 else -7.0, element))
    key, _, _ = arrays.array(np.array([1, 2, 3, 4, 1, 2, 3, 4], np.float32))
    value, _, _ = arrays.array(np.array([5, 6, 7, 8, 5, 6, 7, 8], np.float32))
    slots, _, _ = arrays.array(np.array([0, 2], np.int64))
    with clbt.KVCache(device, flat[4:], flat, num_kv_heads=1, head_size=4, block_size=1,
                      num_blocks=3, cache_dtype=cache_dtype,
                      input_dtype="float32" if fp8 else None, block_stride=8) as cache:
        a = cache.addressing
        assert (a.key_offset, a.value_offset, a.block_stride, a.tensor_span) == (4, 0, 8, 20)
        if fp8:  # a bad scale is named as the caller's, not as C's half
            for name in ("k_scale", "v_scale"):
                with pytest.raises(clbt.InvalidArgumentError) as refused:
                    cache.write(key, value, slots, **{"k_scale": 0.5, "v_scale": 2.0,
                                                      name: float("inf")})
                assert refused.value.message.startswith(name + " inf is not a finite")
        cache.write(key, value, slots, k_scale=0.5, v_scale=2.0)
        device.finish()
    expected = poisoned.copy()
    k_row = [0x40, 0x48, 0x4C, 0x50] if fp8 else [1, 2, 3, 4]
    v_row = [0x42, 0x44, 0x46, 0x48] if fp8 else [5, 6, 7, 8]
    for block in (0, 2):
        expected[8 * block + 4:8 * block + 8] = k_row
        expected[8 * block:8 * block + 4] = v_row
    assert arrays.read(flat_buffer, poisoned).tolist() == expected.tolist()


@pytest.mark.parametrize("value_first", [False, True], ids=["k-first", "v-first"])
@pytest.mark.parametrize("name", ["k_scale", "v_scale"])
def test_fp8_scales_past_float32_are_refused_by_their_name(arrays, value_first, name):
    # A scale finite as a double but not as C's float: 1e39 becomes
    # infinity, 1e-50 becomes 0. Checked in float32, each is refused by its
    # own name, also where the cache is described with K and V exchanged
    # (V at element 0 of the shared buffer), whose C call takes V's scale
    # as k_scale and named the other one. Nothing written.
    heads, head_size, block_size, num_blocks = 1, 16, 2, 2
    shape = (num_blocks, 2, block_size, heads, head_size)
    kv, kv_buffer, kv_cache = arrays.array(np.full(shape, POISON, np.uint8))
    s = kv._strides
    view = ((num_blocks, block_size, heads, head_size), np.uint8, (s[0], s[2], s[3], s[4]))
    halves = [DeviceArray(kv._memory, *view, 0), DeviceArray(kv._memory, *view, s[1])]
    key_cache, value_cache = halves[::-1] if value_first else halves
    key, _, _ = arrays.array(np.ones((1, heads, head_size), np.float16))
    slots, _, _ = arrays.array(np.array([1], np.int64))
    for bad in (1e39, 1e-50):
        scales = {"k_scale": 1.0, "v_scale": 1.0, name: bad}
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            clbt.vllm.reshape_and_cache_flash(key, key, key_cache, value_cache, slots, "fp8",
                                              scales["k_scale"], scales["v_scale"])
        assert refused.value.message.startswith("%s %r is not a finite float32 above 0"
                                                % (name, bad)), refused.value.message
    assert np.all(arrays.read(kv_buffer, kv_cache) == POISON)


@pytest.mark.parametrize("bad", [[[1.0]], None, "key"], ids=["list", "None", "str"])
def test_a_key_of_another_type_is_refused_by_its_name(arrays, bad):
    # key that is no device array: a clbt TypeError naming key, as for
    # value and slot_mapping (it raised AttributeError: no 'dtype').
    kv, kv_buffer, kv_cache = arrays.array(np.full((2, 2, 2, 1, 4), -7.0, np.float16))
    s = kv._strides
    view = ((2, 2, 1, 4), np.float16, (s[0], s[2], s[3], s[4]))
    key_cache, value_cache = (DeviceArray(kv._memory, *view, at) for at in (0, s[1]))
    value, _, _ = arrays.array(np.zeros((1, 1, 4), np.float16))
    slots, _, _ = arrays.array(np.array([0], np.int64))
    with pytest.raises(clbt.TypeMismatchError) as refused:
        clbt.vllm.reshape_and_cache_flash(bad, value, key_cache, value_cache, slots, "auto",
                                          1.0, 1.0)
    assert refused.value.message.startswith("key is ")
    assert np.all(arrays.read(kv_buffer, kv_cache) == -7.0)


def test_kv_cache_write_refuses_a_slot_mapping_of_floats(arrays, device):
    # A float64 slot mapping has int64's element size, and its bits were
    # read as slots: 1.0 became slot 0x3ff0000000000000, counted as past
    # the cache. Refused as a wrong dtype; nothing written or counted.
    flat, flat_buffer, poisoned = arrays.array(np.full(32, -7.0, np.float32))
    key, _, _ = arrays.array(np.arange(4, dtype=np.float32))
    slots, _, _ = arrays.array(np.array([1.0], np.float64))
    with clbt.KVCache(device, flat, num_kv_heads=1, head_size=4, block_size=1,
                      num_blocks=4, cache_dtype="float32") as cache:
        with pytest.raises(clbt.TypeMismatchError) as refused:
            cache.write(key, key, slots)
        assert refused.value.message == "slot_mapping has dtype float64; int64 expected"
        assert cache.rejected_tokens == 0
    assert np.all(arrays.read(flat_buffer, poisoned) == -7.0)


@pytest.mark.parametrize("value_first", [False, True], ids=["k-first", "v-first"])
def test_c_refusals_name_the_callers_key_and_value(arrays, device, value_first):
    # A cache whose V starts the shared buffer is described to C with K and
    # V exchanged, and C's refusal of a write named the other half: a key
    # whose tokens overlap (stride 4 < a row of 8) was reported as
    # write->value_token_stride. Both the facade and KVCache name key.
    heads, head_size, block_size, num_blocks = 2, 4, 2, 2
    kv, kv_buffer, kv_cache = arrays.array(
        np.full((num_blocks, 2, block_size, heads, head_size), -7.0, np.float32))
    s = kv._strides
    view = ((num_blocks, block_size, heads, head_size), np.float32, (s[0], s[2], s[3], s[4]))
    halves = [DeviceArray(kv._memory, *view, 0), DeviceArray(kv._memory, *view, s[1])]
    key_cache, value_cache = halves[::-1] if value_first else halves
    rows, _, _ = arrays.array(np.zeros((3, heads, head_size), np.float32))
    key = DeviceArray(rows._memory, (2, heads, head_size), np.float32, (16, 16, 4), 0)
    slots, _, _ = arrays.array(np.array([0, 1], np.int64))
    words = "write->key_token_stride 4 is below num_kv_heads x head_size 8"
    with pytest.raises(clbt.InvalidArgumentError) as refused:
        clbt.vllm.reshape_and_cache_flash(key, rows, key_cache, value_cache, slots, "auto",
                                          1.0, 1.0)
    assert refused.value.message == words
    flat = DeviceArray(kv._memory, (kv_cache.size,), np.float32)
    at = {"key": s[1] // 4 if value_first else 0, "value": 0 if value_first else s[1] // 4}
    with clbt.KVCache(device, flat[at["key"]:], flat[at["value"]:], num_kv_heads=heads,
                      head_size=head_size, block_size=block_size, num_blocks=num_blocks,
                      cache_dtype="float32", block_stride=s[0] // 4) as cache:
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            cache.write(rows, rows, slots, key_token_stride=4)
        assert refused.value.message == words
    assert np.all(arrays.read(kv_buffer, kv_cache) == -7.0)


# ---- KVCache.write on strided views --------------------------------------

def test_key_and_value_views_of_a_qkv_array_are_read_by_their_token_stride(arrays, device):
    # qkv[:, 1] and qkv[:, 2] of a [5, 3, 2, 4] qkv array: token t's K is
    # 24 elements after token t-1's (the view's own stride), not a row of
    # 8 (read as a contiguous array, token 1's K came from token 0's V).
    # The cache, by hand: slot s = 4 b + p holds token t's K in kv[b, 0, p]
    # and its V in kv[b, 1, p].
    num_tokens, heads, head_size, block_size, num_blocks = 5, 2, 4, 4, 2
    qkv = np.arange(num_tokens * 3 * heads * head_size, dtype=np.float32).reshape(
        num_tokens, 3, heads, head_size)
    qkv_array, _, _ = arrays.array(qkv)
    kv, kv_buffer, kv_cache = arrays.array(
        np.full((num_blocks, 2, block_size, heads, head_size), -7.0, np.float32))
    flat = DeviceArray(kv._memory, (kv_cache.size,), np.float32)
    slots = np.array([5, 0, 7, -1, 2], np.int64)
    slot_array, _, _ = arrays.array(slots)
    with clbt.KVCache(device, flat, num_kv_heads=heads, head_size=head_size,
                      block_size=block_size, num_blocks=num_blocks,
                      cache_dtype="float32") as cache:
        cache.write(qkv_array[:, 1], qkv_array[:, 2], slot_array)
        assert cache.rejected_tokens == 0
    expected = kv_cache.copy()
    for t, slot in enumerate(slots):
        if slot >= 0:
            b, p = divmod(int(slot), block_size)
            expected[b, 0, p], expected[b, 1, p] = qkv[t, 1], qkv[t, 2]
    assert np.array_equal(arrays.read(kv_buffer, kv_cache), expected)


def test_a_strided_slot_mapping_is_refused_by_its_name(arrays, device):
    # Every other int64 of [0, 7, 1, 7, 2, 7]: the view holds slots 0, 1,
    # 2, and C, which reads a slot mapping's entries one after another,
    # wrote the tokens to slots 0, 7 and 1. C takes no slot stride: the
    # view is refused, naming slot_mapping; nothing written.
    flat, flat_buffer, poisoned = arrays.array(np.full(64, -7.0, np.float32))
    key, _, _ = arrays.array(np.arange(12, dtype=np.float32).reshape(3, 1, 4))
    buffer, _, _ = arrays.array(np.array([0, 7, 1, 7, 2, 7], np.int64))
    every_other = DeviceArray(buffer._memory, (3,), np.int64, (16,), 0)
    with clbt.KVCache(device, flat, num_kv_heads=1, head_size=4, block_size=2,
                      num_blocks=4, cache_dtype="float32") as cache:
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            cache.write(key, key, every_other)
        assert refused.value.status == "CLBT_INVALID_ARGUMENT"
        assert refused.value.message == (
            "slot_mapping has strides (2,) for its shape (3,): C reads a slot mapping's "
            "entries one after another; pass a contiguous array")
        assert cache.rejected_tokens == 0
    assert np.all(arrays.read(flat_buffer, poisoned) == -7.0)


def _qkv_views(arrays, shape, order):
    """A float32 array of shape laid out in `order` (a permutation of its
    dimensions: the storage's), as a DeviceArray of shape."""
    storage_shape = tuple(shape[d] for d in order)
    array, _, _ = arrays.array(np.zeros(storage_shape, np.float32))
    storage_strides = array._strides
    strides = [0] * len(shape)
    for position, d in enumerate(order):
        strides[d] = storage_strides[position]
    return DeviceArray(array._memory, shape, np.float32, tuple(strides), 0)


@pytest.mark.parametrize("case, words", [
    # [t, h, 3, d] storage: key = [:, :, 1] has its heads 12 apart.
    ("heads apart", "key has strides (24, 12, 1) for its shape (5, 2, 4): C reads each "
                    "token's num_kv_heads x head_size = 8 elements one after another, "
                    "tokens one stride apart; pass a contiguous array"),
    # [h, t, d] storage: tokens 4 apart, heads 20 apart (a transposed key).
    ("transposed", "key has strides (4, 20, 1) for its shape (5, 2, 4): C reads each "
                   "token's num_kv_heads x head_size = 8 elements one after another, "
                   "tokens one stride apart; pass a contiguous array"),
    ("token stride given", "key_token_stride 8 differs from key's own token stride of 24 "
                           "elements (a view of strides (24, 4, 1))"),
    ("offset given", "key_offset 8 with key a view of strides (24, 4, 1): its tokens are "
                     "the view's; slice the view instead"),
    ("too few tokens", "key holds 5 tokens (a view of strides (24, 4, 1)); num_tokens is "
                       "6"),
])
def test_strided_views_c_cannot_address_are_refused_by_their_name(arrays, device, case,
                                                                  words):
    # C reads a key or value token by token, each token's heads one after
    # another: a view whose heads are apart cannot be read so (they were
    # read as if contiguous), and a strided view's own token stride and
    # offset are what C gets, so a different stride, an offset into the
    # gaps or tokens past the view are refused; nothing written.
    flat, flat_buffer, poisoned = arrays.array(np.full(128, -7.0, np.float32))
    slots, _, _ = arrays.array(np.arange(6, dtype=np.int64))
    qkv = _qkv_views(arrays, (5, 3, 2, 4), (0, 1, 2, 3))
    key, kwargs = qkv[:, 1], {}
    if case == "heads apart":
        key = _qkv_views(arrays, (5, 2, 3, 4), (0, 1, 2, 3))[:, :, 1]
    elif case == "transposed":
        key = _qkv_views(arrays, (5, 2, 4), (1, 0, 2))
    elif case == "token stride given":
        kwargs = dict(key_token_stride=8)
    elif case == "offset given":
        kwargs = dict(key_offset=8)
    value = qkv[:, 2]
    with clbt.KVCache(device, flat, num_kv_heads=2, head_size=4, block_size=2,
                      num_blocks=4, cache_dtype="float32") as cache:
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            cache.write(key, value, slots[:6] if case == "too few tokens" else slots[:5],
                        **kwargs)
        assert refused.value.message == words
        assert refused.value.status == ("CLBT_BUFFER_TOO_SMALL" if case == "too few tokens"
                                        else "CLBT_INVALID_ARGUMENT")
    assert np.all(arrays.read(flat_buffer, poisoned) == -7.0)


def test_a_read_only_cache_is_refused_and_the_packages_buffers_are_writable(arrays, device):
    # A cache on a CL_MEM_READ_ONLY buffer was taken, and every write
    # stored there, which OpenCL leaves undefined. Refused, naming it. The
    # package's create_buffer made only such buffers (and this file used
    # them as caches); it makes writable ones unless asked.
    shape = dict(num_kv_heads=1, head_size=4, block_size=2, num_blocks=2,
                 cache_dtype="float32")
    with _opencl.create_buffer(arrays.context, 128, read_only=True) as read_only:
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            clbt.KVCache(device, clbt.Buffer.from_int_ptr(read_only.int_ptr), **shape)
        assert refused.value.status == "CLBT_READ_ONLY_BUFFER"
        assert refused.value.message.startswith(
            "config->key_cache is a CL_MEM_READ_ONLY buffer, which kernels may only read")
    with _opencl.create_buffer(arrays.context, 128) as writable:
        clbt.KVCache(device, clbt.Buffer.from_int_ptr(writable.int_ptr), **shape).close()


@pytest.mark.parametrize("bad", ["1", True, np.bool_(True), np.array([True]), b"2"],
                         ids=["str", "bool", "numpy-bool", "bool-array", "bytes"])
@pytest.mark.parametrize("cache_dtype", ["float32", "fp8_e4m3"])
def test_a_scale_that_is_no_number_is_refused_by_its_name(arrays, device, bad,
                                                          cache_dtype):
    # k_scale="1" and k_scale=True were taken as 1.0 (float() and numpy
    # read a numeric string and a truth value as numbers). Neither is a
    # scale: refused as a wrong type naming it, from KVCache.write for
    # every cache and from reshape_and_cache_flash for an fp8 one (vLLM's
    # op reads no scale otherwise); nothing written.
    fp8 = cache_dtype == "fp8_e4m3"
    flat, flat_buffer, poisoned = arrays.array(
        np.full(64, 0x5A if fp8 else -7.0, np.uint8 if fp8 else np.float32))
    key, _, _ = arrays.array(np.ones((1, 1, 4), np.float32))
    slots, _, _ = arrays.array(np.array([1], np.int64))
    with clbt.KVCache(device, flat, num_kv_heads=1, head_size=4, block_size=2,
                      num_blocks=4, cache_dtype=cache_dtype,
                      input_dtype="float32" if fp8 else None) as cache:
        for kwargs, name in [(dict(k_scale=bad), "k_scale"), (dict(v_scale=bad), "v_scale")]:
            with pytest.raises(clbt.TypeMismatchError) as refused:
                cache.write(key, key, slots, **kwargs)
            assert refused.value.message.startswith(name + " is a"), refused.value.message
            assert refused.value.message.endswith("; a number expected")
    if fp8:
        view = ((4, 2, 1, 4), np.uint8, (16, 4, 4, 1))
        key_cache, value_cache = (DeviceArray(flat._memory, *view, at) for at in (0, 8))
        for scales, name in [((bad, 1.0), "k_scale"), ((1.0, bad), "v_scale")]:
            with pytest.raises(clbt.TypeMismatchError) as refused:
                clbt.vllm.reshape_and_cache_flash(key, key, key_cache, value_cache, slots,
                                                  "fp8", *scales)
            assert refused.value.message.startswith(name + " is a")
    assert np.all(arrays.read(flat_buffer, poisoned) == poisoned)
