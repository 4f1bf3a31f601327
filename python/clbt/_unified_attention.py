"""vLLM's unified_attention (vllm/v1/attention/ops/triton_unified_attention.py,
the Triton attention backend's op) on clbt: one launch of a clbt.Attention
(_attention.py), described once per layer shape, over a clbt.KVCache
described once per cache. clbt.vllm exports it beside the block tables and
the cache write, as vLLM's model code calls all three.

The arrays are the package's device arrays (clbt.DeviceArray,
pyopencl.array.Array) or host tensors as vLLM's test passes them (torch CPU
tensors, numpy arrays): a host tensor is copied to the device, and a host
``out`` gets the result copied back (docs/python.md, "Paged attention").
"""
import enum
import operator
import threading

import numpy as np

from . import _attention, _cache_ops, _core, _kv_cache, _opencl
from ._device_array import DeviceArray, _is_torch_tensor, _torch_if_imported
from ._errors import INVALID_ARGUMENT as _INVALID_ARGUMENT, Error, wrong_type as _wrong_type
from ._opencl import describe


class KVQuantMode(enum.IntEnum):
    """vLLM's KVQuantMode (vllm/v1/kv_cache_interface.py), by value: what
    a caller without vLLM passes as kv_quant_mode. clbt's attention takes
    NONE and FP8_PER_TENSOR."""
    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3
    INT4_PER_TOKEN_HEAD = 4
    NVFP4 = 5
    TURBOQUANT_K8V4 = 6
    TURBOQUANT_4BIT_NC = 7
    TURBOQUANT_K3V4_NC = 8
    TURBOQUANT_3BIT_NC = 9


# The descriptors unified_attention has made, by device and layer shape (a
# model's layers share a few), as _cache_ops keeps the caches. Threads share
# them: the lock guards the dict, each descriptor's own lock its launch.
_DESCRIPTORS = {}
_DESCRIPTORS_KEPT = 512
_DESCRIPTORS_LOCK = threading.Lock()
_FP8 = "fp8_e4m3"


def _torch_dtypes():
    """{torch dtype: clbt dtype name} of the torch in use: bf16 as
    bfloat16 or 16-bit integers of its bits, fp8 as float8_e4m3fn or uint8
    of its bits (a torch without float8, as Debian 12's, has only those)."""
    torch = _torch_if_imported()
    names = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
             torch.int16: "bfloat16", torch.uint8: _FP8}
    if hasattr(torch, "float8_e4m3fn"):
        names[torch.float8_e4m3fn] = _FP8
    return names


def _is_device(array):
    pyopencl = _opencl.pyopencl
    return isinstance(array, DeviceArray) or (pyopencl is not None and
                                              isinstance(array, pyopencl.array.Array))


def _is_host(array):
    return isinstance(array, np.ndarray) or _is_torch_tensor(array)


def _shape(array, name, ndim):
    """An array's shape, which must have ndim dimensions: a device array or
    a host tensor (torch, numpy)."""
    if not (_is_device(array) or _is_host(array)):
        raise _wrong_type("%s is %s; a device array (clbt.DeviceArray, "
                          "pyopencl.array.Array) or a host tensor (torch, numpy) expected"
                          % (name, describe(array)))
    shape = tuple(int(n) for n in array.shape)
    if len(shape) != ndim:
        raise Error(_INVALID_ARGUMENT, "%s has shape %s; %d dimensions expected" % (
            name, shape, ndim))
    return shape


def _element_type(array, name, allowed):
    """The clbt dtype name of an attention array (q, out, k, v): float32,
    float16, bfloat16 or fp8_e4m3, one of allowed."""
    if _is_torch_tensor(array):
        found = _torch_dtypes().get(array.dtype)
    else:
        dtype = np.dtype(array.np_dtype if isinstance(array, DeviceArray) else array.dtype)
        code = _attention.array_dtype(dtype)
        found = None if code is None else _attention.DTYPE_NAMES[code]
    if found not in allowed:
        raise _wrong_type("%s has dtype %s; %s expected (bf16 as torch.bfloat16 or 16-bit "
                          "integers of its bits, fp8 e4m3fn as torch.float8_e4m3fn or uint8 "
                          "of its bits)" % (name, array.dtype, ", ".join(allowed)))
    return found


def _numpy_dtype(array):
    """An array's numpy dtype; a torch tensor's when numpy has one of its
    own (not bf16, fp8), else None."""
    if _is_torch_tensor(array):
        torch = _torch_if_imported()
        return {torch.int32: np.dtype(np.int32), torch.float32: np.dtype(np.float32),
                torch.float16: np.dtype(np.float16)}.get(array.dtype)
    return np.dtype(array.np_dtype if isinstance(array, DeviceArray) else array.dtype)


def _of_dtype(array, name, ndim, dtype):
    """The shape of an int32 or float32 array of ndim dimensions."""
    shape = _shape(array, name, ndim)
    if _numpy_dtype(array) != dtype:
        raise _wrong_type("%s has dtype %s; %s expected" % (name, array.dtype,
                                                            np.dtype(dtype)))
    return shape


def _bits(array):
    """A host tensor's elements as a C-contiguous numpy array of the bits
    the device holds (bf16 as uint16, fp8 as uint8)."""
    if not _is_torch_tensor(array):
        return np.ascontiguousarray(array)
    torch = _torch_if_imported()
    array = array.detach().cpu().contiguous()
    if array.dtype in (torch.bfloat16, torch.int16):
        return array.view(torch.int16).numpy().view(np.uint16)
    if array.dtype == getattr(torch, "float8_e4m3fn", None):
        return array.view(torch.uint8).numpy()
    return array.numpy()


def _write_back(out, bits):
    """Writes a result's bits into the caller's host out, in its dtype."""
    if not _is_torch_tensor(out):
        out[...] = bits.view(out.dtype)
        return
    torch = _torch_if_imported()
    values = torch.from_numpy(bits.view(np.int16) if bits.dtype == np.uint16 else bits)
    out.copy_(values.view(out.dtype) if values.dtype != out.dtype else values)


def _unsupported(**arguments):
    """Refuses every argument of vLLM's signature that clbt's attention does
    not implement, unless it has its inert default, naming it: what is
    given is never ignored."""
    for name, (value, inert) in arguments.items():
        if value is inert or (isinstance(value, (bool, int, np.integer)) and value == inert):
            continue
        raise Error(_INVALID_ARGUMENT, "%s is %s: clbt's attention does not support it "
                    "(docs/python.md, \"Paged attention\", lists what it does not support)"
                    % (name, describe(value)))


def _window(window_size):
    """clbt's sliding window of vLLM's window_size (left, right): left + 1,
    0 for none (left -1); right must be 0 or -1 (causal)."""
    try:
        left, right = (operator.index(side) for side in window_size)
    except (TypeError, ValueError):
        raise _wrong_type("window_size is %s; (left, right) ints expected" % describe(
            window_size)) from None
    if left < -1:
        raise Error(_INVALID_ARGUMENT, "window_size[0] is %d; -1 (none) or a count >= 0 "
                    "expected" % left)
    if right not in (-1, 0):
        raise Error(_INVALID_ARGUMENT, "window_size[1] is %d: clbt's attention is causal, "
                    "0 or -1 expected" % right)
    return left + 1


def _causal(causal):
    if _is_torch_tensor(causal) or isinstance(causal, np.ndarray) or not causal:
        raise Error(_INVALID_ARGUMENT, "causal is %s: clbt's attention is causal only (True; "
                    "no per-sequence tensor)" % (
                        describe(causal) if hasattr(causal, "shape") else repr(causal)))


def _descales(array, name, num_seqs, num_kv_heads):
    """An fp8 cache's K or V scale: a float (one value, or [num_seqs,
    num_kv_heads] of one value expanded, as vLLM's backend passes its
    per-tensor scale), or a [num_seqs, num_kv_heads] float32 array of
    one per sequence and KV head (a host one copied as it is uploaded)."""
    if array is None:
        raise Error(_INVALID_ARGUMENT, "%s is None; kv_quant_mode FP8_PER_TENSOR needs it"
                    % name)
    shape = tuple(getattr(array, "shape", ()))
    if int(np.prod(shape, dtype=np.int64)) == 1:
        return _kv_cache.finite_scale(array, name), None
    strides = array.stride() if _is_torch_tensor(array) else (
        array._strides if isinstance(array, DeviceArray) else getattr(array, "strides", None))
    if strides and not any(strides):  # one value expanded: read one element
        first = array.reshape(-1)[0] if _is_host(array) else array[(0,) * len(shape)]
        return _kv_cache.finite_scale(first, name), None
    if shape != (num_seqs, num_kv_heads):
        raise Error(_INVALID_ARGUMENT, "%s has shape %s; one value or [num_seqs, "
                    "num_kv_heads] = [%d, %d] expected" % (name, shape, num_seqs,
                                                            num_kv_heads))
    _of_dtype(array, name, 2, np.float32)
    if _is_host(array):
        values = _bits(array)
        if not np.all(np.isfinite(values) & (values > 0)):
            raise Error(_INVALID_ARGUMENT, "%s holds a value that is not finite and above "
                        "0" % name)
    return 1.0, array


def _descriptor(owner, shape, types, softmax_scale, softcap, sliding_window):
    """The clbt.Attention of a layer shape on a device (made on first
    sight, then found: the last 512 are kept)."""
    key = (owner._live(),) + shape + types + (softmax_scale, softcap, sliding_window)
    with _DESCRIPTORS_LOCK:
        attention = _DESCRIPTORS.get(key)
        if attention is None:
            if len(_DESCRIPTORS) >= _DESCRIPTORS_KEPT:
                del _DESCRIPTORS[next(iter(_DESCRIPTORS))]
            num_heads, num_kv_heads, head_size, block_size = shape
            attention = _DESCRIPTORS[key] = _attention.Attention(
                owner, num_heads=num_heads, num_kv_heads=num_kv_heads, head_size=head_size,
                block_size=block_size, cache_dtype=types[0], query_dtype=types[1],
                output_dtype=types[2], softmax_scale=softmax_scale, softcap=softcap,
                sliding_window=sliding_window)
    return attention


def _device_cache(owner, k, v, cache_name):
    """The described clbt.KVCache of device cache views (kept, as the cache
    write keeps its own), refusing V at element 0 of K's buffer: C holds
    such a cache with its halves exchanged, which a write may, attention not."""
    k_view, v_view = _cache_ops.cache_views(k, v, ("k", "v"))
    if k_view[0] == v_view[0] and not v_view[1]:
        raise Error(_INVALID_ARGUMENT, "v starts at element 0 of k's buffer: clbt reads a "
                    "value offset of 0 in one buffer as one block past K; put V after K "
                    "(kv_cache[:, 0] and kv_cache[:, 1]) or in a buffer of its own")
    return _cache_ops.described_cache(owner, cache_name, cache_name, k_view, v_view, False)


def _cache(owner, k, v, cache_name):
    """The clbt.KVCache of the k and v caches: described once and kept
    for device arrays (_device_cache); over copies, for this call alone,
    when either is a host tensor (the caller closes it)."""
    if _is_device(k) and _is_device(v):
        return _device_cache(owner, k, v, cache_name)
    k, v = _on_device(owner, k), _on_device(owner, v)
    k_view, v_view = _cache_ops.cache_views(k, v, ("k", "v"))
    config = _cache_ops.cache_config(cache_name, cache_name, k_view[2], k_view[3], k_view[0],
                                     k_view[1], v_view[0], v_view[1], False)
    return _kv_cache.KVCache.from_config(owner, config)


def unified_attention(q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k,
                      softmax_scale, causal, window_size, block_table, softcap, q_descale,
                      k_descale, v_descale, seq_threshold_3D=None, num_par_softmax_segments=None,
                      softmax_segm_output=None, softmax_segm_max=None, softmax_segm_expsum=None,
                      alibi_slopes=None, output_scale=None, qq_bias=None, sinks=None,
                      mm_prefix_range=None, rswa_prefix_lens=None, rswa_window=None,
                      use_alibi_sqrt=False, kv_quant_mode=KVQuantMode.NONE, k_scale_cache=None,
                      v_scale_cache=None, chunk_lookback=-1, use_td=False,
                      mm_prefix_clamp_sliding_window=False, *, device=None):
    """vLLM's unified_attention on OpenCL: out[t] gets the causal paged
    attention of query token t of q ([num_tokens, num_heads, head_size];
    bf16, fp16, fp32 or fp8 e4m3fn) over the k and v caches ([num_blocks,
    block_size, num_kv_heads, head_size], any strides; their blocks named
    by the int32 block_table [num_seqs, max_blocks]), sequence s having
    the query tokens [cu_seqlens_q[s], cu_seqlens_q[s + 1]) and
    seqused_k[s] tokens of context (int32), as vLLM's kernel computes it
    within vLLM's tolerances (clbt sums in float32). window_size (left,
    right) is (-1, -1) or (w - 1, 0); softcap 0 is none; sinks is
    [num_heads]. kv_quant_mode FP8_PER_TENSOR scales fp8 caches by
    k_descale and v_descale (one value, or one per sequence and KV head:
    [num_seqs, num_kv_heads], which vLLM's kernel reads only the first of)
    and an fp8 q by q_descale; an fp8 out is divided by output_scale and
    saturated. max_seqlen_q and max_seqlen_k are hints. The launch details
    (seq_threshold_3D, num_par_softmax_segments, softmax_segm_*, use_td)
    are accepted and not used: clbt splits contexts from its tuning table,
    in scratch of its own, and leaves the softmax_segm_* tensors as they
    are. alibi_slopes, qq_bias, mm_prefix_range, R-SWA, use_alibi_sqrt,
    per-token-head scale caches, chunk_lookback, a per-sequence causal
    tensor and the other kv_quant_modes are refused, naming the argument.

    Device arrays are used in place (the device is their queue's, or
    device=), and the launch is enqueued without waiting (a device-array
    scale is read first, which waits). Host tensors are copied to the
    device (device=, else the process's default), and a host out gets the
    result copied back once the launch has run: the whole caches cross
    the bus at every call. Everything is checked before anything is
    copied or enqueued; a refusal writes nothing."""
    _unsupported(alibi_slopes=(alibi_slopes, None), qq_bias=(qq_bias, None),
                 mm_prefix_range=(mm_prefix_range, None),
                 rswa_prefix_lens=(rswa_prefix_lens, None), rswa_window=(rswa_window, None),
                 use_alibi_sqrt=(use_alibi_sqrt, False), k_scale_cache=(k_scale_cache, None),
                 v_scale_cache=(v_scale_cache, None), chunk_lookback=(chunk_lookback, -1))
    try:
        mode = KVQuantMode(operator.index(kv_quant_mode))
    except (TypeError, ValueError):
        raise Error(_INVALID_ARGUMENT, "kv_quant_mode is %s; KVQuantMode.NONE or "
                    "FP8_PER_TENSOR expected" % describe(kv_quant_mode)) from None
    if mode not in (KVQuantMode.NONE, KVQuantMode.FP8_PER_TENSOR):
        raise Error(_INVALID_ARGUMENT, "kv_quant_mode is %s: clbt's attention does not "
                    "support it (NONE and FP8_PER_TENSOR)" % mode.name)
    _causal(causal)
    sliding_window = _window(window_size)
    num_tokens, num_heads, head_size = _shape(q, "q", 3)
    if _shape(out, "out", 3) != (num_tokens, num_heads, head_size):
        raise Error(_INVALID_ARGUMENT, "out has shape %s; q's is %s" % (
            tuple(out.shape), (num_tokens, num_heads, head_size)))
    num_blocks, block_size, num_kv_heads, k_head_size = _shape(k, "k", 4)
    if _shape(v, "v", 4) != tuple(k.shape):
        raise Error(_INVALID_ARGUMENT, "v has shape %s; k's is %s" % (tuple(v.shape),
                                                                      tuple(k.shape)))
    if k_head_size != head_size:
        raise Error(_INVALID_ARGUMENT, "k has head_size %d; q's is %d" % (k_head_size,
                                                                          head_size))
    types = ("float32", "float16", "bfloat16", _FP8)
    cache_name = _element_type(k, "k", types)
    if _element_type(v, "v", types) != cache_name:
        raise _wrong_type("v has dtype %s; k's is %s" % (v.dtype, k.dtype))
    query_name = _element_type(q, "q", types)
    output_name = _element_type(out, "out", types)
    num_seqs, = _of_dtype(seqused_k, "seqused_k", 1, np.int32)
    if _of_dtype(cu_seqlens_q, "cu_seqlens_q", 1, np.int32)[0] < num_seqs + 1:
        raise Error(_INVALID_ARGUMENT, "cu_seqlens_q has %d entries; len(seqused_k) + 1 = "
                    "%d expected" % (cu_seqlens_q.shape[0], num_seqs + 1))
    if _of_dtype(block_table, "block_table", 2, np.int32)[0] < num_seqs:
        raise Error(_INVALID_ARGUMENT, "block_table has %d rows; len(seqused_k) = %d "
                    "expected" % (block_table.shape[0], num_seqs))
    if sinks is not None:
        _shape(sinks, "sinks", 1)
        if sinks.shape[0] != num_heads:
            raise Error(_INVALID_ARGUMENT, "sinks has %d entries; q has %d heads" % (
                sinks.shape[0], num_heads))
        sinks = _float32_sinks(sinks)
    softmax_scale = _attention._number(softmax_scale, "softmax_scale")
    if not softmax_scale > 0:
        raise Error(_INVALID_ARGUMENT, "softmax_scale is %r; a scale above 0 expected (clbt "
                    "reads 0 as 1/sqrt(head_size))" % softmax_scale)
    softcap = _attention._number(softcap, "softcap")
    scales, k_descales, v_descales = _scales(
        mode, cache_name, query_name, output_name, q_descale, k_descale, v_descale,
        output_scale, num_seqs, num_kv_heads)
    arrays = {"query": q, "cu_seqlens_q": cu_seqlens_q, "seqused_k": seqused_k,
              "block_table": block_table, "sinks": sinks, "k_descales": k_descales,
              "v_descales": v_descales}
    on_device = [a for a in (k, v, out) + tuple(arrays.values())
                 if a is not None and _is_device(a)]
    owner = _cache_ops.queue_device(on_device[0], device) if on_device else \
        _core.shared_device(device)
    attention = _descriptor(owner, (num_heads, num_kv_heads, head_size, block_size),
                            (cache_name, query_name, output_name), softmax_scale, softcap,
                            sliding_window)
    cache = _cache(owner, k, v, cache_name)
    try:
        device_out = _on_device(owner, out)
        arrays = {name: _on_device(owner, value) for name, value in arrays.items()}
        attention.enqueue(cache, output=device_out, max_seqlen_q=max_seqlen_q,
                          max_seqlen_k=max_seqlen_k, num_seqs=num_seqs, **arrays, **scales)
        if device_out is not out:
            _write_back(out, device_out.numpy())
    finally:
        if not (_is_device(k) and _is_device(v)):
            cache.close()  # over copies made for this call


def _on_device(owner, array):
    """A device array as it is; a host tensor's copy on owner's device."""
    if array is None or _is_device(array):
        return array
    return DeviceArray.from_host(owner, _bits(array))


def _scales(mode, cache_name, query_name, output_name, q_descale, k_descale, v_descale,
            output_scale, num_seqs, num_kv_heads):
    """The fp8 scales of Attention.enqueue, as vLLM's kernel applies them:
    with FP8_PER_TENSOR, an fp8 cache's K and V times k_descale and
    v_descale and an fp8 q times q_descale; with NONE an fp8 cache is read
    as it is (vLLM casts it unscaled, and reads no descale); an fp8 out is
    divided by output_scale (None: 1), which no other out takes. Returns
    (the float scales, k_descales, v_descales: arrays or None)."""
    scales, k_descales, v_descales = {}, None, None
    fp8_cache = cache_name == _FP8
    if mode == KVQuantMode.FP8_PER_TENSOR and not fp8_cache:
        raise Error(_INVALID_ARGUMENT, "kv_quant_mode is FP8_PER_TENSOR with a %s cache: "
                    "clbt scales an fp8 cache only" % cache_name)
    if query_name == _FP8 and mode != KVQuantMode.FP8_PER_TENSOR:
        raise Error(_INVALID_ARGUMENT, "q is fp8 with kv_quant_mode NONE: an fp8 q needs an "
                    "fp8 cache and FP8_PER_TENSOR, as vLLM's kernel scales it")
    if query_name == _FP8:
        if q_descale is None:
            raise Error(_INVALID_ARGUMENT, "q_descale is None; an fp8 q needs it")
        scales["q_descale"] = _kv_cache.finite_scale(q_descale, "q_descale")
    if fp8_cache and mode == KVQuantMode.FP8_PER_TENSOR:
        scales["k_descale"], k_descales = _descales(k_descale, "k_descale", num_seqs,
                                                    num_kv_heads)
        scales["v_descale"], v_descales = _descales(v_descale, "v_descale", num_seqs,
                                                    num_kv_heads)
    if output_name == _FP8:
        scales["output_scale"] = 1.0 if output_scale is None else _kv_cache.finite_scale(
            output_scale, "output_scale")
    elif output_scale is not None:
        raise Error(_INVALID_ARGUMENT, "output_scale is given with a %s out: clbt scales an "
                    "fp8 out only" % output_name)
    return scales, k_descales, v_descales


def _float32_sinks(sinks):
    """Sinks as float32: a device array of them, or a host tensor of
    float32, float16 or bfloat16 (whose values float32 holds exactly)."""
    if _is_torch_tensor(sinks) and sinks.dtype in (_torch_if_imported().bfloat16,
                                                   _torch_if_imported().float16):
        return sinks.float()
    if isinstance(sinks, np.ndarray) and sinks.dtype == np.float16:
        return sinks.astype(np.float32)
    _of_dtype(sinks, "sinks", 1, np.float32)
    return sinks
