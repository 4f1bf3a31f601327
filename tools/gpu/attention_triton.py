#!/usr/bin/env python3
"""clbt's paged attention against vLLM's own Triton unified_attention, on one GPU.

    attention_triton.py --vllm .vllm --out DIR [--iters N] [--bench-json FILE]
                        [--require-triton] [--small]

Runs vLLM's unified_attention (imported from --vllm, a git-ignored folder
holding the upstream file and stand-ins for the vllm modules it imports:
.vllm/README) and clbt_attention_enqueue (through ctypes, on the OpenCL
device CLBT_DEVICE selects) on the same inputs: first on cases of vLLM's
tests/kernels/attention/test_triton_unified_attention.py (its query and
context lengths, head layouts, head sizes, sliding windows, soft-caps, bf16
and fp8 caches, an fp8 query), each output compared with a float64 numpy
reference computed from the stored values (vLLM's tolerances: atol 1.5e-2,
rtol 1e-2; 1.5e-1 with fp8) and clbt's with Triton's; then times both, in
this one process, interleaved, on the bench's shapes (tools/bench/
attention.c: decodes of 16-256 sequences with 1k-32k contexts, one
short sequence, a 2048-token chunk beside 63 decodes; 32 query heads on 8
KV heads of 128, bf16): each call plus a wait for it, and Triton's device
time (CUDA events, and triton.testing.do_bench, which flushes L2), beside
clbt's device figures from --bench-json (clbt bench --only
attention_decode,attention_short,attention_prefill).
vLLM's kernel is launched as its Triton backend launches it: the 3D
(split) kernel for decode batches of at most 128 / num_kv_heads
sequences, 16 segments.

Without CUDA (a machine with PoCL only) the Triton side is skipped and said
to be, and every shape is small (--small): the run checks the script end to
end; --require-triton makes that a failure (the device run). Writes
DIR/attention_triton.json; exits 1 when an output is wrong.
"""
import argparse
import ctypes
import json
import os
import sys
import time
from ctypes import POINTER, byref, c_int32, c_uint, c_uint32, c_uint64, c_void_p

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")  # the repository's
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)

import clbt  # noqa: E402
from clbt import _kv_cache, _opencl  # noqa: E402
from clbt._attention import AttentionBatch, AttentionConfig  # noqa: E402 (declares the calls)
from clbt._library import lib  # noqa: E402
from kv_cache_triton import E4M3, bf16_bits, to_e4m3  # noqa: E402

BF16, FP8 = 3, 4  # clbt_kv_dtype

_cl = ctypes.CDLL("libOpenCL.so.1")
CL_MEM_READ_WRITE = 1
_cl.clCreateBuffer.restype = c_void_p
_cl.clCreateBuffer.argtypes = (c_void_p, c_uint64, ctypes.c_size_t, c_void_p, POINTER(c_int32))
_cl.clEnqueueFillBuffer.restype = c_int32
_cl.clEnqueueFillBuffer.argtypes = (c_void_p, c_void_p, c_void_p, ctypes.c_size_t,
                                    ctypes.c_size_t, ctypes.c_size_t, c_uint, c_void_p,
                                    c_void_p)


def check(status, what):
    if status:
        raise RuntimeError("%s failed: %s: %s" % (what, lib.clbt_status_name(status).decode(),
                                                  lib.clbt_last_error().decode()))


class Clbt:
    """Buffers on clbt's device, its caches and one descriptor per shape."""

    def __init__(self):
        self.device = clbt.Device()
        live = self.device._live()
        self.context = lib.clbt_device_context(live)
        self.queue = lib.clbt_device_queue(live)
        self.buffers, self.caches, self.attentions = [], [], {}

    def buffer(self, values=None, nbytes=None, pattern=None):
        """A buffer holding values, or nbytes of a 16-bit pattern; read-only
        with values (the package's uploads), writable without."""
        nbytes = values.nbytes if values is not None else nbytes
        if values is not None:
            buffer = _opencl.create_buffer(self.context, max(nbytes, 4))
        else:
            error = c_int32()
            handle = _cl.clCreateBuffer(self.context, CL_MEM_READ_WRITE, max(nbytes, 4),
                                        None, byref(error))
            _opencl.check(error.value, "clCreateBuffer")
            buffer = _opencl.Buffer(handle, retain=False)
        self.buffers.append(buffer)
        if values is not None:
            values = np.ascontiguousarray(values)
            _opencl.write(self.queue, buffer.int_ptr, values.ctypes.data, nbytes).wait()
        elif pattern is not None:
            # In pieces of a GiB: NVIDIA's OpenCL on an H100 failed a 4 GiB
            # fill in one command (CL_OUT_OF_RESOURCES at the next call).
            bits = np.array([pattern], np.uint16)
            for at in range(0, nbytes, 1 << 30):
                piece = min(1 << 30, nbytes - at)
                _opencl.check(_cl.clEnqueueFillBuffer(self.queue, buffer.int_ptr,
                                                      bits.ctypes.data, 2, at, piece, 0,
                                                      None, None), "clEnqueueFillBuffer")
        return buffer

    def cache(self, key, value, num_blocks, block_size, kv_heads, head_size, dtype):
        config = _kv_cache.KVCacheConfig(struct_size=ctypes.sizeof(_kv_cache.KVCacheConfig))
        config.cache_dtype = dtype
        config.input_dtype = BF16
        config.num_kv_heads, config.head_size = kv_heads, head_size
        config.block_size, config.num_blocks = block_size, num_blocks
        config.key_cache, config.value_cache = key.int_ptr, value.int_ptr
        handle = c_void_p()
        check(lib.clbt_kv_cache_create(self.device._live(), byref(config), byref(handle)),
              "clbt_kv_cache_create")
        self.caches.append(handle)
        return handle

    def attention(self, heads, kv_heads, head_size, block_size, cache, query, output,
                  window=0, softcap=0.0):
        key = (heads, kv_heads, head_size, block_size, cache, query, output, window, softcap)
        if key not in self.attentions:
            config = AttentionConfig(struct_size=ctypes.sizeof(AttentionConfig),
                                     num_heads=heads, num_kv_heads=kv_heads,
                                     head_size=head_size, block_size=block_size,
                                     cache_dtype=cache, query_dtype=query,
                                     output_dtype=output, softcap=softcap,
                                     sliding_window=window)
            handle = c_void_p()
            check(lib.clbt_attention_create(self.device._live(), byref(config),
                                            byref(handle)), "clbt_attention_create")
            self.attentions[key] = handle
        return self.attentions[key]

    def enqueue(self, attention, cache, batch):
        check(lib.clbt_attention_enqueue(attention, cache, byref(batch), 0, None, None),
              "clbt_attention_enqueue")

    def finish(self):
        _opencl.finish(self.queue)

    def read(self, buffer, like):
        return _opencl.read(self.queue, buffer.int_ptr, np.empty_like(like))

    def rejected(self):
        total = 0
        for handle in self.attentions.values():
            count = c_uint32()
            check(lib.clbt_attention_read_rejected_tokens(handle, byref(count)), "read")
            total += count.value
        return total

    def release(self):
        for handle in self.attentions.values():
            lib.clbt_attention_destroy(handle)
        for handle in self.caches:
            lib.clbt_kv_cache_destroy(handle)
        for buffer in self.buffers:
            buffer.close()
        self.buffers, self.caches, self.attentions = [], [], {}


# ---- a case: inputs, the reference -----------------------------------------------


def values_of_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


class Case:
    """Inputs of one attention call as stored (bf16 bits, e4m3 codes), the
    values they hold, and the batch's arrays."""

    def __init__(self, rng, seqs, heads, head_size, block_size=16, window=0, softcap=0.0,
                 fp8_cache=False, fp8_query=False, num_blocks=None):
        self.q_lens = [q for q, _ in seqs]
        self.kv_lens = [k for _, k in seqs]
        self.heads, self.kv_heads = heads
        self.head_size, self.block_size = head_size, block_size
        self.window, self.softcap = window, softcap
        self.fp8_cache, self.fp8_query = fp8_cache, fp8_query
        self.scale = head_size ** -0.5
        self.q_scale, self.k_scale, self.v_scale = 0.75, 0.5, 0.25
        tokens = sum(self.q_lens)
        self.max_blocks = (max(self.kv_lens) + block_size - 1) // block_size
        self.num_blocks = num_blocks or 2 * len(seqs) * self.max_blocks
        shape = (self.num_blocks, block_size, self.kv_heads, head_size)
        q = rng.standard_normal((tokens, self.heads, head_size)).astype(np.float32)
        k = rng.standard_normal(shape).astype(np.float32)
        v = rng.standard_normal(shape).astype(np.float32)
        if fp8_query:
            self.q_bits = to_e4m3(q / self.q_scale)
            self.q_values = E4M3_VALUES[self.q_bits] * self.q_scale
        else:
            self.q_bits = bf16_bits(q)
            self.q_values = values_of_bf16(self.q_bits)
        if fp8_cache:
            self.k_bits, self.v_bits = to_e4m3(k / self.k_scale), to_e4m3(v / self.v_scale)
            self.k_values = E4M3_VALUES[self.k_bits] * self.k_scale
            self.v_values = E4M3_VALUES[self.v_bits] * self.v_scale
        else:
            self.k_bits, self.v_bits = bf16_bits(k), bf16_bits(v)
            self.k_values, self.v_values = values_of_bf16(self.k_bits), values_of_bf16(self.v_bits)
        self.table = rng.integers(0, self.num_blocks, (len(seqs), self.max_blocks),
                                  dtype=np.int32)
        self.cu = np.cumsum([0] + self.q_lens).astype(np.int32)
        self.used = np.array(self.kv_lens, np.int32)

    def reference(self):
        """Dense attention in float64 from the stored values, vLLM's rules."""
        out = np.zeros((sum(self.q_lens), self.heads, self.head_size))
        group = self.heads // self.kv_heads
        for s, (q_len, kv_len) in enumerate(zip(self.q_lens, self.kv_lens)):
            blocks = self.table[s, :(kv_len + self.block_size - 1) // self.block_size]
            k = self.k_values[blocks].reshape(-1, self.kv_heads, self.head_size)[:kv_len]
            v = self.v_values[blocks].reshape(-1, self.kv_heads, self.head_size)[:kv_len]
            k = np.repeat(k.astype(np.float64), group, axis=1)
            v = np.repeat(v.astype(np.float64), group, axis=1)
            q = self.q_values[self.cu[s]:self.cu[s + 1]].astype(np.float64)
            scores = np.einsum("qhd,khd->hqk", q, k) * self.scale
            if self.softcap:
                scores = self.softcap * np.tanh(scores / self.softcap)
            position = kv_len - q_len + np.arange(q_len)[:, None]
            key = np.arange(kv_len)[None, :]
            masked = key > position
            if self.window:
                masked |= position - key >= self.window
            scores[:, masked] = -np.inf
            scores -= scores.max(axis=-1, keepdims=True)
            weights = np.exp(scores)
            weights /= weights.sum(axis=-1, keepdims=True)
            out[self.cu[s]:self.cu[s + 1]] = np.einsum("hqk,khd->qhd", weights, v)
        return out


E4M3_VALUES = np.concatenate([E4M3, [np.nan], -E4M3, [np.nan]])


def clbt_run(cl, case):
    """clbt's output of a case (bf16 values as float64)."""
    tokens = sum(case.q_lens)
    query = cl.buffer(case.q_bits)
    key, value = cl.buffer(case.k_bits), cl.buffer(case.v_bits)
    out_like = np.zeros((tokens, case.heads, case.head_size), np.uint16)
    output = cl.buffer(nbytes=out_like.nbytes, pattern=0x7FC0)
    cache_type = FP8 if case.fp8_cache else BF16
    cache = cl.cache(key, value, case.num_blocks, case.block_size, case.kv_heads,
                     case.head_size, cache_type)
    attention = cl.attention(case.heads, case.kv_heads, case.head_size, case.block_size,
                             cache_type, FP8 if case.fp8_query else BF16, BF16, case.window,
                             case.softcap)
    batch = batch_of(cl, case, query, output)
    cl.enqueue(attention, cache, batch)
    got = values_of_bf16(cl.read(output, out_like)).astype(np.float64)
    return got


def batch_of(cl, case, query, output):
    batch = AttentionBatch(struct_size=ctypes.sizeof(AttentionBatch))
    batch.num_seqs, batch.num_tokens = len(case.q_lens), sum(case.q_lens)
    batch.max_seqlen_q, batch.max_seqlen_k = max(case.q_lens), max(case.kv_lens)
    batch.query, batch.output = query.int_ptr, output.int_ptr
    batch.cu_seqlens_q = cl.buffer(case.cu).int_ptr
    batch.seqused_k = cl.buffer(case.used).int_ptr
    batch.block_table = cl.buffer(case.table).int_ptr
    batch.max_blocks_per_seq = case.max_blocks
    batch.q_descale, batch.k_descale, batch.v_descale = (case.q_scale, case.k_scale,
                                                         case.v_scale)
    return batch


# ---- vLLM's kernel ---------------------------------------------------------------


class Triton:
    """vLLM's unified_attention, launched as its Triton backend does, when
    CUDA is there."""

    def __init__(self, vllm_dir):
        self.reason = None
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError("torch has no CUDA device")
            sys.path.insert(0, os.path.abspath(vllm_dir))
            from vllm.v1.attention.ops.triton_unified_attention import unified_attention
            from vllm.v1.kv_cache_interface import KVQuantMode
            import triton
        except ImportError as error:
            self.reason = str(error)
            return
        self.torch, self.triton = torch, triton
        self.unified_attention, self.modes = unified_attention, KVQuantMode

    def tensor(self, bits, fp8):
        torch = self.torch
        if fp8:
            return torch.from_numpy(np.ascontiguousarray(bits)).cuda().view(torch.float8_e4m3fn)
        return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).cuda().view(
            torch.bfloat16)

    def launcher(self, case, q, k, v):
        """A call of vLLM's kernel on a case's tensors, all made now."""
        torch = self.torch
        seqs, heads = len(case.q_lens), case.heads
        out = torch.empty((sum(case.q_lens), heads, case.head_size), dtype=torch.bfloat16,
                          device="cuda")
        threshold, segments = 128 // case.kv_heads, 16
        padded = self.triton.next_power_of_2(case.head_size)
        fp8 = case.fp8_cache
        kwargs = dict(
            q=q, k=k, v=v, out=out,
            cu_seqlens_q=torch.from_numpy(case.cu).cuda(), max_seqlen_q=max(case.q_lens),
            seqused_k=torch.from_numpy(case.used).cuda(), max_seqlen_k=max(case.kv_lens),
            softmax_scale=case.scale, causal=True,
            window_size=(case.window - 1, 0) if case.window else (-1, -1),
            block_table=torch.from_numpy(case.table).cuda(), softcap=case.softcap,
            q_descale=torch.tensor(case.q_scale, device="cuda") if case.fp8_query else None,
            k_descale=torch.full((seqs, case.kv_heads), case.k_scale, device="cuda")
            if fp8 else None,
            v_descale=torch.full((seqs, case.kv_heads), case.v_scale, device="cuda")
            if fp8 else None,
            seq_threshold_3D=threshold, num_par_softmax_segments=segments,
            softmax_segm_output=torch.empty((threshold, heads, segments, padded),
                                            dtype=torch.float32, device="cuda"),
            softmax_segm_max=torch.empty((threshold, heads, segments), dtype=torch.float32,
                                         device="cuda"),
            softmax_segm_expsum=torch.empty((threshold, heads, segments),
                                            dtype=torch.float32, device="cuda"),
            kv_quant_mode=self.modes.FP8_PER_TENSOR if fp8 else self.modes.NONE)

        def call():
            self.unified_attention(**kwargs)
        return call, out

    def run(self, case):
        q = self.tensor(case.q_bits, case.fp8_query)
        k, v = self.tensor(case.k_bits, case.fp8_cache), self.tensor(case.v_bits, case.fp8_cache)
        call, out = self.launcher(case, q, k, v)
        call()
        self.torch.cuda.synchronize()
        return out.float().cpu().numpy().astype(np.float64)


# ---- the cases ---------------------------------------------------------------------

VLLM_SETS = [[(1, 1328), (5, 18), (129, 463)], [(1, 523), (1, 37), (1, 2011)]]
SMALL_SETS = [[(1, 166), (5, 18), (17, 58)], [(1, 65), (1, 37), (1, 251)]]


def cases(small):
    """vLLM's test's parameters, each value covered (not their product)."""
    sets = SMALL_SETS if small else VLLM_SETS
    table = [((4, 4), 128, 0, 0.0, False, False), ((8, 2), 128, 64, 50.0, False, False),
             ((5, 1), 256, 128, 0.0, False, False), ((8, 2), 96, 256, 0.0, False, False),
             ((4, 4), 128, 0, 0.0, True, False), ((8, 2), 256, 64, 0.0, True, False),
             ((5, 1), 128, 0, 50.0, True, True), ((4, 4), 96, 128, 0.0, True, True)]
    for i, (heads, head_size, window, softcap, fp8_cache, fp8_query) in enumerate(table):
        name = "h%d/%d-d%d-w%d-cap%d-%s%s-set%s" % (
            heads[0], heads[1], head_size, window, softcap, "fp8" if fp8_cache else "bf16",
            "-fp8q" if fp8_query else "", "AB"[i % 2])
        yield name, dict(seqs=sets[i % 2], heads=heads, head_size=head_size, window=window,
                         softcap=softcap, fp8_cache=fp8_cache, fp8_query=fp8_query)


def within(got, expected, fp8):
    atol, rtol = (1.5e-1, 1.5e-1) if fp8 else (1.5e-2, 1e-2)
    return bool(np.all(np.abs(got - expected) <= atol + rtol * np.abs(expected)))


def check_cases(cl, triton, small, seed):
    results, failures = [], 0
    for number, (name, spec) in enumerate(cases(small)):
        case = Case(np.random.default_rng([seed, number]), **spec)
        expected = case.reference()
        got = clbt_run(cl, case)
        fp8 = spec["fp8_cache"] or spec["fp8_query"]
        record = {"name": name, "clbt_ok": within(got, expected, fp8),
                  "clbt_error": float(np.nanmax(np.abs(got - expected)))}
        if not triton.reason:
            theirs = triton.run(case)
            record["triton_ok"] = within(theirs, expected, fp8)
            record["triton_error"] = float(np.nanmax(np.abs(theirs - expected)))
            record["clbt_vs_triton"] = float(np.nanmax(np.abs(got - theirs)))
        failures += not record["clbt_ok"]
        results.append(record)
        print("%-36s clbt %s (%.2e)  triton %s" % (
            name, "ok" if record["clbt_ok"] else "WRONG", record["clbt_error"],
            "-" if triton.reason else "%s (%.2e), clbt-triton %.2e" % (
                "ok" if record["triton_ok"] else "WRONG", record["triton_error"],
                record["clbt_vs_triton"])))
    failures += cl.rejected() > 0
    cl.release()
    return results, failures


# ---- timing ------------------------------------------------------------------------

GPU_SHAPES = [("decode-16x1k", 16, 1024, 0), ("decode-16x4k", 16, 4096, 0),
              ("decode-16x32k", 16, 32768, 0), ("decode-64x1k", 64, 1024, 0),
              ("decode-64x8k", 64, 8192, 0), ("decode-64x32k", 64, 32768, 0),
              ("decode-256x1k", 256, 1024, 0), ("decode-256x4k", 256, 4096, 0),
              ("decode-256x8k", 256, 8192, 0), ("short-1x256", 1, 256, 0),
              ("prefill-2k-beside-63x4k", 64, 4096, 2048)]
SMALL_SHAPES = [("decode-4x512", 4, 512, 0), ("short-1x256", 1, 256, 0),
                ("prefill-64-beside-3x256", 4, 256, 64)]


class Shape:
    """A timing shape: 32 query heads on 8 KV heads of 128, bf16, every
    value 1.0 (the time does not depend on them), blocks scattered."""

    def __init__(self, rng, seqs, context, chunk):
        self.q_lens = [chunk if chunk and s == 0 else 1 for s in range(seqs)]
        self.kv_lens = [context] * seqs
        self.heads, self.kv_heads, self.head_size, self.block_size = 32, 8, 128, 16
        self.window, self.softcap, self.scale = 0, 0.0, 128 ** -0.5
        self.fp8_cache = self.fp8_query = False
        self.max_blocks = (context + 15) // 16
        self.num_blocks = seqs * self.max_blocks + 1
        self.table = rng.permutation(self.num_blocks)[:seqs * self.max_blocks].astype(
            np.int32).reshape(seqs, self.max_blocks)
        self.cu = np.cumsum([0] + self.q_lens).astype(np.int32)
        self.used = np.array(self.kv_lens, np.int32)
        self.q_scale = self.k_scale = self.v_scale = 1.0
        self.kv_bytes = seqs * context * 8 * 128 * 2 * 2


def median_us(samples):
    return float(np.median(samples)) * 1e6


def time_shape(cl, triton, name, shape, iters):
    tokens = sum(shape.q_lens)
    cache_bytes = shape.num_blocks * 16 * 8 * 128 * 2
    key, value = cl.buffer(nbytes=cache_bytes, pattern=0x3F80), cl.buffer(
        nbytes=cache_bytes, pattern=0x3F80)
    query = cl.buffer(nbytes=tokens * 32 * 128 * 2, pattern=0x3F80)
    output = cl.buffer(nbytes=tokens * 32 * 128 * 2, pattern=0)
    cache = cl.cache(key, value, shape.num_blocks, 16, 8, 128, BF16)
    attention = cl.attention(32, 8, 128, 16, BF16, BF16, BF16)
    batch = batch_of(cl, shape, query, output)
    clbt_call = lambda: cl.enqueue(attention, cache, batch)  # noqa: E731
    figures = {"name": name, "kv_mib": shape.kv_bytes / 2 ** 20, "tokens": tokens}
    torch_call = None
    if not triton.reason:
        torch = triton.torch
        q = torch.ones((tokens, 32, 128), dtype=torch.bfloat16, device="cuda")
        k = torch.ones((shape.num_blocks, 16, 8, 128), dtype=torch.bfloat16, device="cuda")
        v = torch.ones_like(k)
        torch_call, _ = triton.launcher(shape, q, k, v)
    for _ in range(5):
        clbt_call()
        if torch_call:
            torch_call()
    cl.finish()
    if torch_call:
        triton.torch.cuda.synchronize()
    ours, theirs = [], []
    for _ in range(iters):
        start = time.perf_counter()
        clbt_call()
        cl.finish()
        ours.append(time.perf_counter() - start)
        if torch_call:
            start = time.perf_counter()
            torch_call()
            triton.torch.cuda.synchronize()
            theirs.append(time.perf_counter() - start)
    figures["clbt_call_us"] = median_us(ours)
    if torch_call:
        torch = triton.torch
        figures["triton_call_us"] = median_us(theirs)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for begin, end in zip(starts, ends):
            begin.record()
            torch_call()
            end.record()
        torch.cuda.synchronize()
        figures["triton_events_us"] = float(np.median(
            [b.elapsed_time(e) for b, e in zip(starts, ends)])) * 1e3
        try:
            figures["triton_do_bench_us"] = triton.triton.testing.do_bench(
                torch_call, return_mode="median") * 1e3
        except TypeError:  # an older Triton
            figures["triton_do_bench_us"] = triton.triton.testing.do_bench(
                torch_call, quantiles=[0.5]) * 1e3
        del q, k, v
        torch.cuda.empty_cache()
    cl.release()
    return figures


def judge(figures, bench):
    """The issue's verdicts, side by side in this process (call and wait),
    and on the device where the bench's figures are there."""
    name, ours = figures["name"], figures["clbt_call_us"]
    theirs = figures.get("triton_call_us")
    if theirs is None:
        return "no Triton"
    device = bench.get(name, {}).get("device_us")
    events = figures["triton_events_us"]
    ratio = theirs / ours
    text = "Triton/clbt %.2f (calls)" % ratio
    if device:
        text += ", %.2f (device: clbt %.1f us, Triton %.1f us)" % (events / device, device,
                                                                     events)
    if name.startswith("decode"):
        text += ": " + ("met" if ratio >= 1.0 else "missed by %.0f%%" % (100 * (1 - ratio)))
    elif name.startswith("prefill"):
        text += ": target >= 0.33, " + ("met" if ratio >= 0.33 else "missed by %.0f%%" % (
            100 * (1 - ratio / 0.33)))
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm", default=os.path.join(HERE, "..", ".vllm"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--bench-json")
    parser.add_argument("--require-triton", action="store_true")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    triton = Triton(args.vllm)
    if triton.reason:
        print("triton: skipped (%s)" % triton.reason)
        if args.require_triton:
            print("attention_triton: --require-triton, and Triton cannot run")
            return 1
    small = args.small or bool(triton.reason)
    cl = Clbt()
    print("clbt device: %s" % cl.device.selector)
    results, failures = check_cases(cl, triton, small, args.seed)
    bench = {}
    if args.bench_json and os.path.exists(args.bench_json):
        with open(args.bench_json) as f:
            report = json.load(f)
        for section in ("attention_decode", "attention_short", "attention_prefill"):
            for record in report.get(section, []):
                bench[record["name"]] = record
    timing = []
    rng = np.random.default_rng(args.seed)
    for name, seqs, context, chunk in SMALL_SHAPES if small else GPU_SHAPES:
        figures = time_shape(cl, triton, name, Shape(rng, seqs, context, chunk), args.iters)
        figures["verdict"] = judge(figures, bench)
        timing.append(figures)
        print("%-26s %8.1f MiB  clbt %9.1f us  triton %9s us  %s" % (
            name, figures["kv_mib"], figures["clbt_call_us"],
            "%.1f" % figures["triton_call_us"] if "triton_call_us" in figures else "-",
            figures["verdict"]))
    print("attention_triton: %d cases, %d wrong; %d shapes timed" % (
        len(results), failures, len(timing)))
    with open(os.path.join(args.out, "attention_triton.json"), "w") as f:
        json.dump({"device": cl.device.selector, "triton": triton.reason or "ran",
                   "cases": results, "timing": timing}, f, indent=1)
    cl.device.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
