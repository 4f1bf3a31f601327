#!/usr/bin/env python3
"""clbt's KV-cache write against vLLM's own Triton kernel, on one GPU.

    kv_cache_triton.py --vllm .vllm --out DIR [--iters N] [--bench-json FILE]
                       [--require-triton]

Runs vLLM's triton_reshape_and_cache_flash (imported from --vllm, a
git-ignored folder holding the upstream file and stand-ins for the two
vllm modules it imports; see tools/gpu/kv_cache.sh) and
clbt.vllm.reshape_and_cache_flash (on the OpenCL device CLBT_DEVICE
selects) on the same inputs, on the shapes of vLLM's
tests/kernels/attention/test_cache.py (several head counts, head sizes
64-256, block sizes 16-64, fp16 and bf16 models, kv_cache_dtype "auto" and
"fp8", FlashInfer's kv_cache[:, 0] / [:, 1] of one tensor, the flash NHD
layout and a permuted HND one; Triton's flash path supports NHD only, so
HND is checked against the reference alone), plus larger batches and one
of hostile values (NaN, infinities, values past 448 x scale, subnormals).
Every cache starts as the same random bytes and is compared whole, byte
for byte, three ways: clbt against Triton, clbt against a numpy reference
of the documented rounding (docs/semantics.md: x / scale correctly rounded
in float32, then e4m3fn to nearest even, saturated at 448, NaN 0x7f), and
Triton against the reference. Where fp8 bytes differ, a probe kernel gives
Triton's own float32 quotient x / scale, to say whether its division (not
its rounding) explains the difference. Then times Triton's kernel (device
time with triton.testing.do_bench, which flushes L2, and with CUDA events
back to back; host time of a call and synchronize) on the bench's shapes,
beside clbt's figures from --bench-json (clbt bench --only kv_cache).

Without CUDA (a machine with PoCL only) the Triton side is skipped and
said to be; --require-triton makes that a failure (the device run). Writes
DIR/kv_cache_triton.json; exits 1 when clbt differs from the reference, or
from Triton where Triton's quotient does not explain it.
"""
import argparse
import json
import os
import random
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")  # the repository's
sys.path.insert(0, os.path.join(ROOT, "python"))

import clbt  # noqa: E402
import clbt.vllm  # noqa: E402
from clbt import _opencl  # noqa: E402
from clbt._device_array import DeviceArray, Memory  # noqa: E402
from clbt._library import lib  # noqa: E402

# ---- the reference: docs/semantics.md's rules, in numpy --------------------


def _e4m3_values():
    codes = np.arange(0x7F)
    exponent, mantissa = codes >> 3, codes & 7
    return np.where(exponent == 0, mantissa * 2.0**-9,
                    (1 + mantissa / 8.0) * 2.0**(exponent - 7.0))


E4M3 = _e4m3_values()


def to_e4m3(q):
    """float32 quotients as e4m3fn codes: nearest, ties to the even code,
    saturated at 448 (past 464 and infinity too), NaN 0x7f."""
    q = np.asarray(q, np.float64)
    a = np.minimum(np.abs(q), 448.0)
    high = np.clip(np.searchsorted(E4M3, a), 0, 0x7E)
    low = np.maximum(high - 1, 0)
    below, above = a - E4M3[low], E4M3[high] - a
    code = np.where(below < above, low,
                    np.where(above < below, high, np.where(low % 2 == 0, low, high)))
    code = np.where(np.signbit(q), code | 0x80, code)
    return np.where(np.isnan(q), 0x7F, code).astype(np.uint8)


def bf16_bits(x):
    """float32 as bf16 bits, to nearest even (finite inputs)."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def values_of(stored, dtype):
    """K/V elements as float32 (exact)."""
    if dtype == "float16":
        return stored.astype(np.float32)
    return (stored.astype(np.uint32) << 16).view(np.float32)


def reference(cache, layout, stored, dtype, slots, fp8, scales):
    """The write into a copy of a [nb, 2, ...] cache of raw elements."""
    expected = cache.copy()
    block_size = cache.shape[2] if layout == "NHD" else cache.shape[3]
    for t, slot in enumerate(slots):
        if slot < 0:
            continue
        b, p = divmod(int(slot), block_size)
        for kv in range(2):
            row = stored[t, 1 + kv]
            if fp8:
                with np.errstate(over="ignore", invalid="ignore"):
                    q = values_of(row, dtype) / np.float32(scales[kv])
                row = to_e4m3(q.astype(np.float32))
            if layout == "NHD":
                expected[b, kv, p] = row
            else:
                expected[b, kv, :, p] = row
    return expected


# ---- cases -----------------------------------------------------------------


def cases():
    """(name, num_tokens, heads, head_size, block_size, num_blocks, dtype,
    fp8, layout, hostile) of test_cache.py's shapes and a few larger."""
    out = []
    for dtype in ("float16", "bfloat16"):
        for fp8 in (False, True):
            for layout in ("NHD", "HND"):
                for head_size in (64, 80, 128, 256):
                    for block_size in (16, 32, 64):
                        out.append((21, 8, head_size, block_size, 32, dtype, fp8, layout,
                                    False))
                for heads in (1, 4, 16):
                    out.append((42, heads, 128, 16, 32, dtype, fp8, layout, False))
            out.append((4096, 8, 128, 16, 512, dtype, fp8, "NHD", False))
            out.append((512, 8, 128, 16, 64, dtype, fp8, "NHD", True))
    named = []
    for c in out:
        name = "%s-%s-%s-t%d-h%d-d%d-b%d%s" % (c[5], "fp8" if c[6] else "auto", c[7], c[0],
                                               c[1], c[2], c[3], "-hostile" if c[8] else "")
        named.append((name,) + c)
    return named


def make_inputs(rng, num_tokens, heads, head_size, dtype, hostile):
    """A qkv tensor [t, 3, h, d] of stored elements (fp16, or bf16 bits)."""
    shape = (num_tokens, 3, heads, head_size)
    if hostile:  # any bit pattern: NaN, infinities, huge and tiny values
        bits = rng.integers(0, 1 << 16, shape, dtype=np.uint16)
        return bits.view(np.float16) if dtype == "float16" else bits
    x = rng.standard_normal(shape).astype(np.float32)
    return x.astype(np.float16) if dtype == "float16" else bf16_bits(x)


def cache_shape(num_blocks, block_size, heads, head_size, layout):
    """FlashInfer's kv_cache: [nb, 2, B, H, D] (NHD) or [nb, 2, H, B, D] (HND)."""
    if layout == "NHD":
        return (num_blocks, 2, block_size, heads, head_size)
    return (num_blocks, 2, heads, block_size, head_size)


def scales_of(stored, dtype, hostile):
    """vLLM's test's per-tensor scales: amax / 64 (finite values only)."""
    if hostile:
        return 0.0173, 0.0291
    k = values_of(stored[:, 1], dtype)
    v = values_of(stored[:, 2], dtype)
    return float(np.float32(k.max() / 64.0)), float(np.float32(v.max() / 64.0))


# ---- clbt's side --------------------------------------------------------------


class OpenCLArrays:
    """Buffers on clbt's device holding host arrays, as DeviceArray views."""

    def __init__(self, device):
        self.device = device
        self.context = lib.clbt_device_context(device._live())
        self.queue = lib.clbt_device_queue(device._live())
        self.buffers = []

    def array(self, values):
        values = np.ascontiguousarray(values)
        buffer = _opencl.create_buffer(self.context, values.nbytes)
        self.buffers.append(buffer)
        _opencl.write(self.queue, buffer.int_ptr, values.ctypes.data, values.nbytes).wait()
        memory = Memory(buffer.int_ptr, self.queue, values.nbytes)
        whole = DeviceArray(memory, values.shape, values.dtype)
        return whole, buffer

    def read(self, buffer, like):
        return _opencl.read(self.queue, buffer.int_ptr, np.empty_like(like))

    def release(self):
        for buffer in self.buffers:
            buffer.close()
        self.buffers = []


def cache_views(kv, element, layout):
    """key_cache and value_cache of a [nb, 2, ...] DeviceArray, each shaped
    [nb, B, H, D] (HND: a permuted view, as vLLM's FlashInfer backend)."""
    s = kv._strides
    nb, _, a, b, d = kv.shape
    if layout == "NHD":
        shape, strides = (nb, a, b, d), (s[0], s[2], s[3], s[4])
    else:
        shape, strides = (nb, b, a, d), (s[0], s[3], s[2], s[4])
    key = DeviceArray(kv._memory, shape, element, strides, kv.cl_offset)
    value = DeviceArray(kv._memory, shape, element, strides, kv.cl_offset + s[1])
    return key, value


def clbt_write(arrays, cache, stored, slots, layout, fp8, scales):
    kv, buffer = arrays.array(cache)
    key_cache, value_cache = cache_views(kv, cache.dtype, layout)
    qkv, _ = arrays.array(stored)
    t, _, h, d = stored.shape
    s = qkv._strides
    views = [DeviceArray(qkv._memory, (t, h, d), stored.dtype, (s[0], s[2], s[3]),
                         (1 + i) * h * d * stored.itemsize) for i in range(2)]
    slot_array, _ = arrays.array(slots)
    clbt.vllm.reshape_and_cache_flash(views[0], views[1], key_cache, value_cache, slot_array,
                                      "fp8" if fp8 else "auto", scales[0], scales[1])
    return arrays.read(buffer, cache)


# ---- Triton's side ----------------------------------------------------------


class Triton:
    """vLLM's kernel and a probe of its division, when CUDA is there."""

    def __init__(self, vllm_dir):
        self.reason = None
        try:
            import torch
            if not torch.cuda.is_available():
                raise ImportError("torch has no CUDA device")
            sys.path.insert(0, os.path.abspath(vllm_dir))
            from vllm.v1.attention.ops.triton_reshape_and_cache_flash import (
                triton_reshape_and_cache_flash)
            import triton
            import triton.language as tl
        except ImportError as error:
            self.reason = str(error)
            return
        self.torch, self.triton, self.write = torch, triton, triton_reshape_and_cache_flash

        @triton.jit
        def quotient(x_ptr, s_ptr, out_ptr, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = i < n
            x = tl.load(x_ptr + i, mask=mask)
            tl.store(out_ptr + i, x / tl.load(s_ptr), mask=mask)

        self.quotient_kernel = quotient

    def tensor(self, values, dtype):
        torch = self.torch
        t = torch.from_numpy(np.ascontiguousarray(values).view(
            np.int16 if dtype == "bfloat16" else values.dtype)).cuda()
        return t.view(torch.bfloat16) if dtype == "bfloat16" else t

    def inputs(self, cache, stored, slots, dtype, layout, scales):
        torch = self.torch
        bf16 = cache.dtype == np.uint16
        kv = torch.from_numpy(cache.view(np.int16) if bf16 else cache.copy()).cuda()
        if bf16:
            kv = kv.view(torch.bfloat16)
        if layout == "NHD":
            key_cache, value_cache = kv[:, 0], kv[:, 1]
        else:
            key_cache, value_cache = kv[:, 0].permute(0, 2, 1, 3), kv[:, 1].permute(0, 2, 1, 3)
        qkv = self.tensor(stored, dtype)
        scale = [torch.tensor([s], dtype=torch.float32, device="cuda") for s in scales]
        return (kv, qkv[:, 1], qkv[:, 2], key_cache, value_cache,
                torch.from_numpy(slots).cuda(), scale)

    def run(self, cache, stored, slots, dtype, layout, fp8, scales):
        kv, key, value, key_cache, value_cache, slot_mapping, scale = self.inputs(
            cache, stored, slots, dtype, layout, scales)
        self.write(key, value, key_cache, value_cache, slot_mapping,
                   "fp8" if fp8 else "auto", scale[0], scale[1])
        self.torch.cuda.synchronize()
        out = kv.cpu()
        return (out.view(self.torch.int16) if cache.dtype == np.uint16 else out).numpy().view(
            cache.dtype)

    def quotients(self, stored, dtype, scale):
        """Triton's float32 x / scale of every element, as its kernel divides."""
        torch = self.torch
        x = self.tensor(stored, dtype).reshape(-1)
        out = torch.empty(x.numel(), dtype=torch.float32, device="cuda")
        s = torch.tensor([scale], dtype=torch.float32, device="cuda")
        self.quotient_kernel[(self.triton.cdiv(x.numel(), 1024),)](x, s, out, x.numel(),
                                                                  BLOCK=1024)
        torch.cuda.synchronize()
        return out.cpu().numpy()

    def timings(self, num_tokens, iters):
        """Triton's kernel on a bench shape: do_bench's median (L2 flushed),
        CUDA events back to back, and a call plus synchronize on the host."""
        torch = self.torch
        heads, head, block = 8, 128, 16
        slots_n = max(num_tokens, 8192)
        rng = np.random.default_rng(num_tokens)
        stored = rng.standard_normal((num_tokens, 3, heads, head)).astype(np.float16)
        cache = np.zeros((slots_n // block, 2, block, heads, head), np.float16)
        if num_tokens >= 8192:  # a prefill: its tokens in order, in shuffled blocks
            order = rng.permutation(slots_n // block)
            slots = (order[np.arange(num_tokens) // block] * block
                     + np.arange(num_tokens) % block).astype(np.int64)
        else:  # decode: one slot each anywhere
            slots = np.array(random.Random(num_tokens).sample(range(slots_n), num_tokens),
                             np.int64)
        kv, key, value, key_cache, value_cache, slot_mapping, scale = self.inputs(
            cache, stored, slots, "float16", "NHD", (1.0, 1.0))

        def call():
            self.write(key, value, key_cache, value_cache, slot_mapping, "auto", scale[0],
                       scale[1])

        for _ in range(10):
            call()
        torch.cuda.synchronize()
        try:
            bench_ms = self.triton.testing.do_bench(call, return_mode="median")
        except TypeError:  # an older Triton
            bench_ms = self.triton.testing.do_bench(call, quantiles=[0.5])
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for start, end in zip(starts, ends):
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        events_us = float(np.median([s.elapsed_time(e) for s, e in zip(starts, ends)])) * 1e3
        host = []
        for _ in range(iters):
            begin = time.perf_counter()
            call()
            torch.cuda.synchronize()
            host.append((time.perf_counter() - begin) * 1e6)
        moved = 4.0 * num_tokens * heads * head * 2
        return {"do_bench_us": bench_ms * 1e3, "events_us": events_us,
                "call_sync_us": float(np.median(host)),
                "do_bench_gb_s": moved / (bench_ms * 1e3) / 1e3,
                "events_gb_s": moved / events_us / 1e3}


# ---- the run -------------------------------------------------------------------


def differing(a, b):
    return int(np.count_nonzero(a.view(np.uint8) != b.view(np.uint8)))


def explain_fp8(triton, stored, dtype, scales, got_triton, expected, layout, slots):
    """How many fp8 bytes where Triton differs from the reference Triton's
    own quotient explains (its e4m3 of its quotient is what it wrote)."""
    block_size = got_triton.shape[2] if layout == "NHD" else got_triton.shape[3]
    explained = total = quotient_differs = elements = 0
    for kv in range(2):
        rows = stored[:, 1 + kv]
        q_triton = triton.quotients(rows, dtype, scales[kv]).reshape(rows.shape)
        with np.errstate(over="ignore", invalid="ignore"):
            q_exact = (values_of(rows, dtype) / np.float32(scales[kv])).astype(np.float32)
        quotient_differs += int(np.count_nonzero(
            (q_triton.view(np.uint32) != q_exact.view(np.uint32)) & ~np.isnan(q_exact)))
        elements += rows.size
        for t, slot in enumerate(slots):
            if slot < 0:
                continue
            b, p = divmod(int(slot), block_size)
            out = got_triton[b, kv, p] if layout == "NHD" else got_triton[b, kv, :, p]
            ref = expected[b, kv, p] if layout == "NHD" else expected[b, kv, :, p]
            bad = out.view(np.uint8) != ref.view(np.uint8)
            total += int(np.count_nonzero(bad))
            explained += int(np.count_nonzero(bad & (to_e4m3(q_triton[t]) == out.view(np.uint8))))
    return {"differing": total, "explained_by_triton_quotient": explained,
            "triton_quotient_not_correctly_rounded": quotient_differs,
            "elements": elements}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm", default=os.path.join(ROOT, ".vllm"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--bench-json")
    parser.add_argument("--require-triton", action="store_true")
    parser.add_argument("--seed", type=int, default=26)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    triton = Triton(args.vllm)
    if triton.reason:
        print("triton: skipped (%s)" % triton.reason)
        if args.require_triton:
            print("kv_cache_triton: --require-triton, and Triton cannot run")
            return 1
    device = clbt.Device()
    print("clbt device: %s" % device.selector)
    arrays = OpenCLArrays(device)
    results, failures = [], 0
    for name, num_tokens, heads, head_size, block_size, num_blocks, dtype, fp8, layout, \
            hostile in cases():
        rng = np.random.default_rng([args.seed, len(results)])
        stored = make_inputs(rng, num_tokens, heads, head_size, dtype, hostile)
        element = np.uint8 if fp8 else stored.dtype
        shape = cache_shape(num_blocks, block_size, heads, head_size, layout)
        cache = rng.integers(0, 256, int(np.prod(shape)) * np.dtype(element).itemsize,
                             dtype=np.uint8).view(element).reshape(shape)
        slots = np.array(random.Random(len(results)).sample(
            range(num_blocks * block_size), num_tokens), np.int64)
        slots[rng.random(num_tokens) < 0.05] = -1
        scales = scales_of(stored, dtype, hostile)
        expected = reference(cache, layout, stored, dtype, slots, fp8, scales)
        got = clbt_write(arrays, cache, stored, slots, layout, fp8, scales)
        arrays.release()
        record = {"name": name, "bytes": int(cache.nbytes),
                  "clbt_vs_reference": differing(got, expected)}
        if not triton.reason and layout == "NHD":
            got_triton = triton.run(cache, stored, slots, dtype, layout, fp8, scales)
            record["clbt_vs_triton"] = differing(got, got_triton)
            record["triton_vs_reference"] = differing(got_triton, expected)
            if fp8 and record["triton_vs_reference"]:
                record["triton_fp8"] = explain_fp8(triton, stored, dtype, scales, got_triton,
                                                   expected, layout, slots)
        failures += record["clbt_vs_reference"] > 0
        unexplained = record.get("clbt_vs_triton", 0) - record.get("triton_fp8", {}).get(
            "explained_by_triton_quotient", 0)
        failures += unexplained > 0
        results.append(record)
        print("%-46s clbt/ref %6d  clbt/triton %6s  triton/ref %6s%s" % (
            name, record["clbt_vs_reference"], record.get("clbt_vs_triton", "-"),
            record.get("triton_vs_reference", "-"),
            "  (Triton's quotient explains %d)" % record["triton_fp8"][
                "explained_by_triton_quotient"] if "triton_fp8" in record else ""))
    exact = sum(1 for r in results if r["clbt_vs_reference"] == 0)
    compared = [r for r in results if "clbt_vs_triton" in r]
    print("kv_cache_triton: %d cases; clbt bit-exact with the reference in %d; with Triton in "
          "%d of %d compared" % (len(results), exact,
                                 sum(1 for r in compared if r["clbt_vs_triton"] == 0),
                                 len(compared)))
    timing = {}
    if not triton.reason:
        for tokens in (8192, 16384, 256):
            timing["triton-%d" % tokens] = triton.timings(tokens, args.iters)
    if args.bench_json and os.path.exists(args.bench_json):
        with open(args.bench_json) as f:
            bench = json.load(f)
        for record in bench.get("kv_cache", []):
            timing["clbt-" + record["name"]] = record
    for name, figures in timing.items():
        print("%-16s %s" % (name, "  ".join(
            "%s %s" % (k, ("%.2f" % v) if isinstance(v, float) else v)
            for k, v in figures.items() if k != "name")))
    for tokens, clbt_name in ((8192, "prefill-8192"), (16384, "prefill-16384")):
        theirs, ours = timing.get("triton-%d" % tokens), timing.get("clbt-" + clbt_name)
        if theirs and ours:
            print("prefill-%d: clbt's write %.1f us on the device, Triton's %.1f us (events) / "
                  "%.1f us (do_bench, L2 flushed): clbt %s" % (
                      tokens, ours["write_device_us"], theirs["events_us"],
                      theirs["do_bench_us"],
                      "as fast or faster" if ours["write_device_us"] <= theirs["events_us"]
                      else "slower"))
    with open(os.path.join(args.out, "kv_cache_triton.json"), "w") as f:
        json.dump({"device": device.selector, "triton": triton.reason or "ran",
                   "cases": results, "timing": timing}, f, indent=1)
    device.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
