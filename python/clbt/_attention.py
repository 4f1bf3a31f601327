"""Paged attention (clbt_attention): a layer shape's attention, described
once, and one launch per layer and step over a clbt.KVCache.

The arrays are device arrays (a pyopencl.array.Array or a clbt.DeviceArray,
whose shape, strides and element offset are taken from it) or buffers
(pyopencl.Buffer, clbt.Buffer: read from their first element, contiguous,
with the counts given). docs/python.md, "Paged attention", has an example;
clbt.vllm.unified_attention is vLLM's op over this class.
"""
from __future__ import annotations

import contextlib
import ctypes
import operator
import threading
from ctypes import byref, c_float, c_int, c_uint32, c_uint64, c_void_p
from typing import Any, Optional, Sequence

import numpy as np

from . import _arguments as check
from . import _opencl
from ._core import Device, Table, _check, _Closable, _CObject
from ._errors import (BUFFER_TOO_SMALL, INVALID_ARGUMENT, Error, TypeMismatchError,
                      wrong_type)
from ._kv_cache import DTYPES, LAYOUTS, KVCache, dtype_code, finite_scale, tensor_view
from ._library import _SizedConfig, lib
from ._threads import one_thread_at_a_time


class AttentionConfig(_SizedConfig):
    """clbt_attention_config (CLBT_ATTENTION_CONFIG_INIT)."""
    _fields_ = [(name, c_uint32) for name in (
        "struct_size", "num_heads", "num_kv_heads", "head_size", "block_size")] + [
        (name, c_int) for name in ("layout", "cache_dtype", "query_dtype", "output_dtype")] + [
        ("softmax_scale", c_float), ("softcap", c_float), ("sliding_window", c_uint32)]


class AttentionBatch(_SizedConfig):
    """clbt_attention_batch (CLBT_ATTENTION_BATCH_INIT)."""
    _fields_ = [(name, c_uint32) for name in (
        "struct_size", "num_seqs", "num_tokens", "max_seqlen_q", "max_seqlen_k",
        "block_table_stride", "max_blocks_per_seq", "cp_world_size", "cp_rank",
        "cp_interleave_size")] + [(name, c_void_p) for name in (
            "query", "output", "cu_seqlens_q", "seqused_k", "table", "idx_mapping",
            "block_table", "sinks", "k_descales", "v_descales", "lse")] + [
        (name, c_uint64) for name in (
            "query_offset", "query_token_stride", "query_head_stride", "output_offset",
            "output_token_stride", "output_head_stride", "cu_seqlens_q_offset",
            "seqused_k_offset", "idx_mapping_offset", "block_table_offset", "sinks_offset",
            "k_descales_offset", "v_descales_offset", "lse_offset", "lse_token_stride",
            "lse_head_stride")] + [
        (name, c_float) for name in ("q_descale", "k_descale", "v_descale", "output_scale")]


lib.clbt_attention_create.restype = c_int
lib.clbt_attention_create.argtypes = (c_void_p, c_void_p, c_void_p)
lib.clbt_attention_destroy.restype = None
lib.clbt_attention_destroy.argtypes = (c_void_p,)
lib.clbt_attention_enqueue.restype = c_int
lib.clbt_attention_enqueue.argtypes = (c_void_p, c_void_p, c_void_p, ctypes.c_uint, c_void_p,
                                       c_void_p)
lib.clbt_attention_read_rejected_tokens.restype = c_int
lib.clbt_attention_read_rejected_tokens.argtypes = (c_void_p, c_void_p)
lib.clbt_attention_reset_rejected_tokens.restype = c_int
lib.clbt_attention_reset_rejected_tokens.argtypes = (c_void_p,)

#: clbt_kv_dtype of an array's numpy dtype: float32, float16, 2-byte
#: integers holding bf16 bits, 1-byte unsigned integers holding e4m3fn bits.
_FP8 = DTYPES["fp8_e4m3"]


def array_dtype(dtype: np.dtype) -> Optional[int]:
    """The clbt_kv_dtype a device array of this numpy dtype holds (bf16 as
    16-bit integers, fp8 e4m3fn as uint8), or None."""
    if dtype == np.float32:
        return DTYPES["float32"]
    if dtype == np.float16:
        return DTYPES["float16"]
    if dtype.kind in "iu" and dtype.itemsize == 2:
        return DTYPES["bfloat16"]
    if dtype == np.uint8:
        return _FP8
    return None


DTYPE_NAMES = {code: name for name, code in DTYPES.items()}


class _Operand:
    """Where C finds one array of the batch: its buffer handle, the element
    offset of its first element, its shape and element strides (None for
    a buffer, read from its start and contiguous)."""
    __slots__ = ("handle", "offset", "shape", "strides")

    def __init__(self, obj, name, ndim, dtype, kind):
        """dtype: the numpy dtype expected (int32, float32), or None with
        kind the clbt_kv_dtype expected (query, output)."""
        pyopencl = _opencl.pyopencl
        if check.is_device_array(obj) and not (pyopencl is not None and
                                               isinstance(obj, pyopencl.array.Array)):
            self.handle = _opencl.handle(obj, "buffer", name)  # refuses a bare int
            self.offset, self.shape, self.strides = 0, None, None
            return
        self.handle, self.offset, self.shape, self.strides, found = tensor_view(obj, name, ndim)
        if dtype is not None and found != dtype:
            raise wrong_type("%s has dtype %s; %s expected" % (name, found, np.dtype(dtype)))
        if dtype is None and array_dtype(found) != kind:
            raise wrong_type("%s has dtype %s; the attention's %s is %s (%s)" % (
                name, found, name, DTYPE_NAMES[kind], _ARRAY_DTYPES[kind]))

    def length(self, name, needed, why, axis=0):
        """Refuses an array with fewer than needed entries along axis."""
        if self.shape is not None and self.shape[axis] < needed:
            raise Error(BUFFER_TOO_SMALL, "%s has shape %s; %s needs %d along dimension %d"
                        % (name, self.shape, why, needed, axis))

    def contiguous(self, name):
        """Refuses an array whose elements C cannot read one after another."""
        if self.strides is not None:
            step = 1
            for n, s in zip(reversed(self.shape), reversed(self.strides)):
                if n > 1 and s != step:
                    raise Error(INVALID_ARGUMENT, "%s has strides %s for its shape %s; C "
                                "reads its entries one after another: pass a contiguous "
                                "array" % (name, self.strides, self.shape))
                step *= n


_ARRAY_DTYPES = {DTYPES["float32"]: "float32", DTYPES["float16"]: "float16",
                 DTYPES["bfloat16"]: "16-bit integers of bf16 bits",
                 _FP8: "uint8 of e4m3fn bits"}


def _count(value, operand, name, what):
    """A count given, or read from an array's first dimension."""
    if value is not None:
        return check.u32(value, what)
    if operand.shape is None:
        raise Error(INVALID_ARGUMENT, "%s is needed with %s a buffer" % (what, name))
    return operand.shape[0]


@one_thread_at_a_time(operator.attrgetter("_lock"))
class Attention(_Closable):
    """A layer shape's paged attention (clbt_attention): vLLM's
    unified_attention over a clbt.KVCache, its kernels built once.

    Attention(device, num_heads=, num_kv_heads=, head_size=, block_size=,
    cache_dtype=, query_dtype=None, output_dtype=None, layout="flash",
    softmax_scale=0.0, softcap=0.0, sliding_window=0) describes the heads
    (query head h reads KV head h // (num_heads // num_kv_heads)), the
    caches it reads (their num_kv_heads, head_size, block_size, layout and
    cache_dtype: "float32", "float16", "bfloat16", "fp8_e4m3"), the query
    and output types (None: the cache's, and the query's; an fp8 cache
    needs query_dtype, an fp8 query output_dtype), the softmax scale (0:
    1/sqrt(head_size)), the logits soft-cap (0: none) and the sliding
    window (0: none; vLLM's window_size[0] + 1). One descriptor serves
    every layer of its shape; enqueue names the layer's cache.

    A descriptor is one thread's at a time in C (its kernels take each
    launch's arguments): every public call holds its lock, as a KVCache's
    does."""
    _kind = "attention descriptor"
    _lock = contextlib.nullcontext()  # until __init__ has made the descriptor's

    def __init__(self, device: Device, *, num_heads: int, num_kv_heads: int, head_size: int,
                 block_size: int, cache_dtype: str, query_dtype: Optional[str] = None,
                 output_dtype: Optional[str] = None, layout: str = "flash",
                 softmax_scale: float = 0.0, softcap: float = 0.0, sliding_window: int = 0):
        if not isinstance(device, Device):
            raise wrong_type("device is %s; a clbt.Device expected" % _opencl.describe(device))
        if layout not in LAYOUTS:
            raise Error(INVALID_ARGUMENT, "layout is %r; 'flash' or 'head_major' expected"
                        % (layout,))
        config = AttentionConfig(
            num_heads=check.u32(num_heads, "num_heads"),
            num_kv_heads=check.u32(num_kv_heads, "num_kv_heads"),
            head_size=check.u32(head_size, "head_size"),
            block_size=check.u32(block_size, "block_size"), layout=LAYOUTS[layout],
            cache_dtype=dtype_code(cache_dtype, "cache_dtype"),
            query_dtype=0 if query_dtype is None else dtype_code(query_dtype, "query_dtype"),
            output_dtype=0 if output_dtype is None else dtype_code(output_dtype,
                                                                   "output_dtype"),
            softmax_scale=_number(softmax_scale, "softmax_scale"),
            softcap=_number(softcap, "softcap"),
            sliding_window=check.u32(sliding_window, "sliding_window"))
        self._lock = threading.RLock()
        out = c_void_p()
        held = device._object()  # until the C descriptor has its own reference
        _check(lib.clbt_attention_create(held.pointer, byref(config), byref(out)))
        self._c = _CObject(out.value, lib.clbt_attention_destroy)
        self._device = device
        self.num_heads, self.num_kv_heads = config.num_heads, config.num_kv_heads
        self.head_size, self.block_size = config.head_size, config.block_size
        self.cache_dtype = config.cache_dtype
        self.query_dtype = config.query_dtype or config.cache_dtype
        self.output_dtype = config.output_dtype or self.query_dtype

    def enqueue(self, cache: KVCache, query: Any, output: Any, cu_seqlens_q: Any,
                seqused_k: Any, *, block_table: Any = None, table: Optional[Table] = None,
                idx_mapping: Any = None, num_seqs: Optional[int] = None,
                num_tokens: Optional[int] = None, max_seqlen_q: int = 0,
                max_seqlen_k: int = 0, max_blocks_per_seq: Optional[int] = None,
                cp_world_size: int = 0, cp_rank: int = 0, cp_interleave_size: int = 0,
                sinks: Any = None, k_descales: Any = None, v_descales: Any = None,
                lse: Any = None, q_descale: float = 1.0, k_descale: float = 1.0,
                v_descale: float = 1.0, output_scale: float = 1.0,
                wait_for: Optional[Sequence[Any]] = None, event: bool = False):
        """Enqueues one layer's attention over a batch
        (clbt_attention_enqueue): sequence s has the query tokens
        [cu_seqlens_q[s], cu_seqlens_q[s + 1]) (rows of query and output,
        [num_tokens, num_heads, head_size] of the descriptor's types) and
        seqused_k[s] tokens of context, its query tokens the last of them,
        attended causally (int32 arrays). Block ids come from a dense int32
        block_table ([num_seqs, max_blocks], row s sequence s's; any row
        stride) or from a clbt.Table's committed rows (table, with an
        optional int32 idx_mapping). Optional: sinks (float32 [num_heads]),
        k_descales / v_descales (float32 [num_seqs, num_kv_heads],
        contiguous: an fp8 cache's scales per sequence and KV head, in
        place of k_descale / v_descale), lse (float32 [num_tokens,
        num_heads]: each row's log-sum-exp). An fp8 query is multiplied by
        q_descale, an fp8 cache's K and V by k_descale and v_descale, an
        fp8 output divided by output_scale. num_seqs defaults to
        seqused_k's length, num_tokens to query's. max_seqlen_q and
        max_seqlen_k are hints (0: unknown), never trusted. Tokens whose
        blocks are out of range get 0 and are counted (rejected_tokens).
        Returns without waiting; event=True returns the launch's event."""
        self._live()  # a closed descriptor is refused before anything is read
        if not isinstance(cache, KVCache):
            raise wrong_type("cache is %s; a clbt.KVCache expected" % _opencl.describe(cache))
        if cache._exchanged:
            raise Error(INVALID_ARGUMENT, "cache was described with V at element 0 of "
                        "key_cache's buffer and K after it, which C holds as its halves "
                        "exchanged: attention would read V as K; describe V after K, or in "
                        "a buffer of its own")
        if (block_table is None) == (table is None):
            raise Error(INVALID_ARGUMENT, "give one of block_table and table: the source of "
                        "the block ids")
        if table is not None and not isinstance(table, Table):
            raise wrong_type("table is %s; a clbt.Table expected" % _opencl.describe(table))
        q = _Operand(query, "query", 3, None, self.query_dtype)
        out = _Operand(output, "output", 3, None, self.output_dtype)
        cu = _Operand(cu_seqlens_q, "cu_seqlens_q", 1, np.int32, None)
        used = _Operand(seqused_k, "seqused_k", 1, np.int32, None)
        num_seqs = _count(num_seqs, used, "seqused_k", "num_seqs")
        num_tokens = _count(num_tokens, q, "query", "num_tokens")
        heads = (self.num_heads, self.head_size)
        for operand, name in ((q, "query"), (out, "output")):
            if operand.shape is not None and operand.shape[1:] != heads:
                raise Error(INVALID_ARGUMENT, "%s has shape %s; the attention's heads are "
                            "[%d, %d]" % ((name, operand.shape) + heads))
            operand.length(name, num_tokens, "num_tokens")
        cu.length("cu_seqlens_q", num_seqs + 1, "num_seqs + 1")
        used.length("seqused_k", num_seqs, "num_seqs")
        for operand, name in ((cu, "cu_seqlens_q"), (used, "seqused_k")):
            operand.contiguous(name)
        batch = AttentionBatch(
            num_seqs=num_seqs, num_tokens=num_tokens,
            max_seqlen_q=check.u32(max_seqlen_q, "max_seqlen_q"),
            max_seqlen_k=check.u32(max_seqlen_k, "max_seqlen_k"),
            cp_world_size=check.u32(cp_world_size, "cp_world_size"),
            cp_rank=check.u32(cp_rank, "cp_rank"),
            cp_interleave_size=check.u32(cp_interleave_size, "cp_interleave_size"),
            query=q.handle, output=out.handle, cu_seqlens_q=cu.handle, seqused_k=used.handle,
            query_offset=q.offset, output_offset=out.offset, cu_seqlens_q_offset=cu.offset,
            seqused_k_offset=used.offset)
        if q.strides is not None:
            batch.query_token_stride, batch.query_head_stride = q.strides[:2]
        if out.strides is not None:
            batch.output_token_stride, batch.output_head_stride = out.strides[:2]
        self._block_ids(batch, block_table, table, idx_mapping, max_blocks_per_seq)
        self._options(batch, sinks, k_descales, v_descales, lse)
        self._scales(batch, cache, q_descale, k_descale, v_descale, output_scale)
        count, address, held = _opencl.wait_list(wait_for)
        done = c_void_p() if event else None
        _check(lib.clbt_attention_enqueue(self._live(), cache._live(), byref(batch), count,
                                          address, None if done is None else byref(done)))
        return _opencl.event_object(done.value) if event else None

    __call__ = enqueue

    def _block_ids(self, batch, block_table, table, idx_mapping, max_blocks_per_seq):
        """The batch's source of block ids: a dense table's rows, or a
        clbt.Table's committed rows read through idx_mapping."""
        if table is not None:
            batch.table = table._live()
            if max_blocks_per_seq is not None:
                raise Error(INVALID_ARGUMENT, "max_blocks_per_seq is a dense block_table's; "
                            "a table's rows have its width")
            if idx_mapping is not None:
                rows = _Operand(idx_mapping, "idx_mapping", 1, np.int32, None)
                rows.length("idx_mapping", batch.num_seqs, "num_seqs")
                rows.contiguous("idx_mapping")
                batch.idx_mapping, batch.idx_mapping_offset = rows.handle, rows.offset
            return
        if idx_mapping is not None:
            raise Error(INVALID_ARGUMENT, "idx_mapping names rows of a table; a "
                        "block_table's row s is sequence s's")
        dense = _Operand(block_table, "block_table", 2, np.int32, None)
        if dense.shape is None:
            if max_blocks_per_seq is None:
                raise Error(INVALID_ARGUMENT, "max_blocks_per_seq is needed with block_table "
                            "a buffer")
            width = check.u32(max_blocks_per_seq, "max_blocks_per_seq")
        else:
            dense.length("block_table", batch.num_seqs, "num_seqs")
            if dense.shape[1] > 1 and dense.strides[1] != 1:
                raise Error(INVALID_ARGUMENT, "block_table has strides %s; a row's entries "
                            "must be contiguous" % (dense.strides,))
            width = dense.shape[1] if max_blocks_per_seq is None else check.u32(
                max_blocks_per_seq, "max_blocks_per_seq")
            check.at_least("block_table's columns", dense.shape[1], width,
                           "max_blocks_per_seq", BUFFER_TOO_SMALL)
            if dense.shape[0] > 1:
                batch.block_table_stride = check.u32(dense.strides[0], "block_table's row "
                                                     "stride")
        batch.block_table, batch.block_table_offset = dense.handle, dense.offset
        batch.max_blocks_per_seq = width

    def _options(self, batch, sinks, k_descales, v_descales, lse):
        """The optional float32 arrays: sinks, per-(sequence, KV head)
        descales and the log-sum-exp out."""
        if sinks is not None:
            operand = _Operand(sinks, "sinks", 1, np.float32, None)
            operand.length("sinks", self.num_heads, "num_heads")
            operand.contiguous("sinks")
            batch.sinks, batch.sinks_offset = operand.handle, operand.offset
        for name, descales in (("k_descales", k_descales), ("v_descales", v_descales)):
            if descales is not None:
                operand = _Operand(descales, name, 2, np.float32, None)
                if operand.shape is not None and operand.shape[1] != self.num_kv_heads:
                    raise Error(INVALID_ARGUMENT, "%s has shape %s; [num_seqs, %d] expected"
                                % (name, operand.shape, self.num_kv_heads))
                operand.length(name, batch.num_seqs, "num_seqs")
                operand.contiguous(name)
                setattr(batch, name, operand.handle)
                setattr(batch, name + "_offset", operand.offset)
        if lse is not None:
            operand = _Operand(lse, "lse", 2, np.float32, None)
            if operand.shape is not None and operand.shape[1] != self.num_heads:
                raise Error(INVALID_ARGUMENT, "lse has shape %s; [num_tokens, %d] expected"
                            % (operand.shape, self.num_heads))
            operand.length("lse", batch.num_tokens, "num_tokens")
            batch.lse, batch.lse_offset = operand.handle, operand.offset
            if operand.strides is not None:
                batch.lse_token_stride, batch.lse_head_stride = operand.strides

    def _scales(self, batch, cache, q_descale, k_descale, v_descale, output_scale):
        """The fp8 scales that apply, checked by their names; the others
        are not read (C reads none of them)."""
        if self.query_dtype == _FP8:
            batch.q_descale = finite_scale(q_descale, "q_descale")
        if self.cache_dtype == _FP8:
            batch.k_descale = finite_scale(k_descale, "k_descale")
            batch.v_descale = finite_scale(v_descale, "v_descale")
        if self.output_dtype == _FP8:
            batch.output_scale = finite_scale(output_scale, "output_scale")

    @property
    def rejected_tokens(self) -> int:
        """The query tokens the launches have rejected (blocks outside
        their row or the cache, impossible lengths) since creation or the
        last reset; waits for the queue to reach the read."""
        count = c_uint32()
        _check(lib.clbt_attention_read_rejected_tokens(self._live(), byref(count)))
        return count.value

    def reset_rejected_tokens(self) -> None:
        _check(lib.clbt_attention_reset_rejected_tokens(self._live()))

    def close(self) -> None:
        """Releases the C descriptor once no call holds it; closing twice
        is fine."""
        _Closable.close(self)

    def __repr__(self):
        if self.closed:
            return "<clbt.Attention closed>"
        return "<clbt.Attention %d heads on %d KV heads x %d, %s cache>" % (
            self.num_heads, self.num_kv_heads, self.head_size, DTYPE_NAMES[self.cache_dtype])


def _number(value, name):
    """A float field of the config: a real number (C refuses one that is
    not finite or below 0)."""
    if isinstance(value, (bool, str, bytes)) or not isinstance(value, (int, float, np.number)):
        raise wrong_type("%s is %s; a number expected" % (name, _opencl.describe(value)))
    return float(value)
