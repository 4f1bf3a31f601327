"""Paged attention from Python: clbt.vllm.unified_attention called as
vLLM's tests/kernels/attention/test_triton_unified_attention.py calls it
(vllm-project/vllm at 6066bb3d), on host tensors (torch CPU tensors, numpy
arrays) and on the package's device arrays, and clbt.Attention over a
clbt.KVCache, against dense attention in float64 written here from the
reference that test defines (ref_paged_attn: each query token attends
causally from the end of its context, within the sliding window, scores
soft-capped, softmax in full precision). Inputs are quantised to their
types first (formats.py) and the model reads the values they hold; outputs
are poisoned first and compared within vLLM's tolerances (atol 1.5e-2,
rtol 1e-2; 1.5e-1 with fp8, 2e-1 for an fp8 output). Refused calls raise
a clbt.Error naming the argument and write nothing.

CI runs a covering subset of vLLM's cases (every value of every parameter,
not their product: each distinct shape and type is a program PoCL builds);
CLBT_TEST_ATTENTION=full runs the whole product (docs/python.md, "Tests",
gives its time)."""
import itertools
import os

import numpy as np
import pytest

import clbt
import clbt.vllm
from clbt.vllm import KVQuantMode
from formats import from_bf16, from_e4m3, to_bf16, to_e4m3

try:
    import torch
except ImportError:  # python_without_torch, or no torch: the numpy path
    torch = None

HOST = "numpy" if torch is None else "torch"
SETS = {"a": [(1, 1328), (5, 18), (129, 463)], "b": [(1, 523), (1, 37), (1, 2011)]}
SCALES = {"q": 0.75, "k": 0.5, "v": 0.25}  # vLLM's fp8 scales, not 1 on purpose
TOLERANCES = {"plain": (1.5e-2, 1e-2), "fp8": (1.5e-1, 1.5e-1), "fp8_out": (2e-1, 2e-1)}
FP8 = "fp8_e4m3"
NAN_BITS = {"bfloat16": np.uint16(0x7FC0), FP8: np.uint8(0x7F)}


# ---- the model: dense attention in float64 --------------------------------

def dense_attention(q, k, v, cu, used, table, scale, window=0, softcap=0.0, sinks=None,
                    k_scales=None, v_scales=None):
    """Each sequence's attention from its query rows of q [T, H, D] over
    the keys and values its table row names in k and v [blocks,
    block_size, KVH, D] (values as their types hold them, float64), as
    ref_paged_attn computes it; k_scales and v_scales [S, KVH] scale a
    sequence's keys and values per KV head; sinks [H] add exp(sink) to each
    head's denominator. Returns (out [T, H, D], lse [T, H])."""
    tokens, heads, size = q.shape
    block_size, kv_heads = k.shape[1], k.shape[2]
    group = heads // kv_heads
    out, lse = np.zeros((tokens, heads, size)), np.full((tokens, heads), -np.inf)
    for s in range(len(used)):
        first, last, length = cu[s], cu[s + 1], used[s]
        blocks = table[s, :-(-length // block_size)]
        keys = k[blocks].reshape(-1, kv_heads, size)[:length]
        values = v[blocks].reshape(-1, kv_heads, size)[:length]
        if k_scales is not None:
            keys, values = keys * k_scales[s][:, None], values * v_scales[s][:, None]
        keys, values = np.repeat(keys, group, axis=1), np.repeat(values, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q[first:last], keys) * scale
        if softcap:
            scores = softcap * np.tanh(scores / softcap)
        position = length - (last - first) + np.arange(last - first)[:, None]
        key = np.arange(length)[None, :]
        allowed = (key <= position) & ((position - key < window) if window else True)
        scores = np.where(allowed[None], scores, -np.inf)
        top = scores.max(axis=2, keepdims=True)
        if sinks is not None:
            top = np.maximum(top, sinks[:, None, None])
        weights = np.exp(scores - top)
        total = weights.sum(axis=2, keepdims=True)
        if sinks is not None:
            total += np.exp(sinks[:, None, None] - top)
        out[first:last] = np.einsum("hqk,khd->qhd", weights / total, values)
        lse[first:last] = (np.log(total) + top)[:, :, 0].T
    return out, lse


# ---- inputs in their types, as host tensors or device arrays -----------------

def quantised(values, dtype, scale=1.0):
    """(the elements of dtype holding values / scale, the values they hold
    times scale, float64)."""
    if dtype == "float32":
        bits = values.astype(np.float32)
        return bits, bits.astype(np.float64)
    if dtype == "float16":
        bits = values.astype(np.float16)
        return bits, bits.astype(np.float64)
    if dtype == "bfloat16":
        bits = to_bf16(values)
        return bits, from_bf16(bits).astype(np.float64)
    bits = to_e4m3(values / scale)
    return bits, from_e4m3(bits) * scale


def decoded(bits, dtype):
    """The float64 values of elements of dtype."""
    if dtype == "bfloat16":
        return from_bf16(bits).astype(np.float64)
    if dtype == FP8:
        return from_e4m3(bits)
    return bits.astype(np.float64)


def poison(shape, dtype):
    """Elements of dtype that are all NaN."""
    if dtype in NAN_BITS:
        return np.full(shape, NAN_BITS[dtype])
    return np.full(shape, np.nan, dtype=np.float32 if dtype == "float32" else np.float16)


def host(bits, kind, dtype=None):
    """A host tensor of elements: a numpy array as it is, or a torch tensor
    of the dtype (bf16 as torch.bfloat16, fp8 as uint8 bits, as vLLM
    stores fp8 caches and a torch without float8 gives them)."""
    if kind == "numpy":
        return bits
    if dtype == "bfloat16":
        return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(bits))


def bits_of(tensor):
    """A host tensor's or device array's elements, as numpy arrays hold
    them (bf16 as uint16)."""
    if isinstance(tensor, clbt.DeviceArray):
        return tensor.numpy()
    if torch is not None and isinstance(tensor, torch.Tensor):
        if tensor.dtype == torch.bfloat16:
            return tensor.view(torch.int16).numpy().view(np.uint16)
        return tensor.numpy()
    return tensor


class Case:
    """One call's inputs: vLLM's shapes and random values, quantised."""

    def __init__(self, seq_lens, heads, head_size, types, window=0, softcap=0.0,
                 num_blocks=512, seed=0, block_size=16):
        rng = np.random.default_rng(seed)
        self.types = types  # {"q", "kv", "out"}: dtype names
        self.q_lens = [q for q, _ in seq_lens]
        self.used = np.array([k for _, k in seq_lens], np.int32)
        self.cu = np.cumsum([0] + self.q_lens).astype(np.int32)
        self.heads, self.kv_heads = heads
        self.head_size, self.window, self.softcap = head_size, window, softcap
        self.scale = head_size ** -0.5
        tokens = int(self.cu[-1])
        self.q, self.q_values = quantised(
            rng.standard_normal((tokens, self.heads, head_size)), types["q"], SCALES["q"])
        shape = (num_blocks, block_size, self.kv_heads, head_size)
        self.k, self.k_values = quantised(rng.standard_normal(shape), types["kv"], SCALES["k"])
        self.v, self.v_values = quantised(rng.standard_normal(shape), types["kv"], SCALES["v"])
        width = -(-int(self.used.max()) // block_size)
        self.table = rng.integers(0, num_blocks, (len(self.used), width), dtype=np.int32)
        self.out = poison((tokens, self.heads, head_size), types["out"])

    @property
    def fp8(self):
        return FP8 in (self.types["q"], self.types["kv"])

    def expected(self, **options):
        return dense_attention(self.q_values, self.k_values, self.v_values, self.cu,
                               self.used, self.table, self.scale, self.window, self.softcap,
                               **options)

    def arguments(self, kind, **changes):
        """unified_attention's keyword arguments as vLLM's test passes them,
        as host tensors of kind ("torch", "numpy") or device arrays
        ("device": clbt.DeviceArray on the device given)."""
        device = changes.pop("device", None)

        def array(bits, dtype=None):
            if kind == "device":
                return clbt.DeviceArray.from_host(device, bits)
            return host(bits, kind, dtype)

        def scalar(value):
            values = np.array(value, np.float32)
            return torch.from_numpy(values) if kind == "torch" else values

        fp8_kv = self.types["kv"] == FP8
        descales = np.full((len(self.used), self.kv_heads), 1.0, np.float32)
        arguments = dict(
            q=array(self.q, self.types["q"]), k=array(self.k, self.types["kv"]),
            v=array(self.v, self.types["kv"]), out=array(self.out, self.types["out"]),
            cu_seqlens_q=array(self.cu), seqused_k=array(self.used),
            max_seqlen_q=max(self.q_lens), max_seqlen_k=int(self.used.max()),
            softmax_scale=self.scale, causal=True,
            window_size=(self.window - 1, 0) if self.window else (-1, -1),
            block_table=array(self.table), softcap=self.softcap,
            q_descale=scalar(SCALES["q"]) if self.types["q"] == FP8 else None,
            k_descale=array(descales * SCALES["k"]) if fp8_kv else None,
            v_descale=array(descales * SCALES["v"]) if fp8_kv else None,
            kv_quant_mode=KVQuantMode.FP8_PER_TENSOR if fp8_kv else KVQuantMode.NONE)
        if self.types["out"] == FP8:
            arguments["output_scale"] = scalar(0.5)
        arguments.update(changes)
        return arguments

    def check(self, out, tolerance, expected=None, output_scale=1.0):
        """out's rows against the model's (or expected), within a
        tolerance (atol, rtol); every row written (no poison left)."""
        expected = self.expected()[0] if expected is None else expected
        got = decoded(bits_of(out), self.types["out"]) * output_scale
        assert np.isfinite(got).all(), "rows left unwritten (poisoned)"
        atol, rtol = tolerance
        error = np.abs(got - expected)
        assert (error <= atol + rtol * np.abs(expected)).all(), error.max()
        return error.max()


def segments(heads, head_size, threshold):
    """vLLM's softmax_segm_* launch tensors (16 segments), filled with a
    pattern that must survive: clbt uses scratch of its own."""
    padded = 1 << (head_size - 1).bit_length()
    shapes = {"softmax_segm_output": (threshold, heads, 16, padded),
              "softmax_segm_max": (threshold, heads, 16),
              "softmax_segm_expsum": (threshold, heads, 16)}
    made = {name: np.full(shape, 7.0, np.float32) for name, shape in shapes.items()}
    if torch is not None:
        made = {name: torch.from_numpy(values) for name, values in made.items()}
    return dict(made, seq_threshold_3D=threshold, num_par_softmax_segments=16)


# ---- vLLM's cases --------------------------------------------------------

TYPES = {"bf16": {"q": "bfloat16", "kv": "bfloat16", "out": "bfloat16"},
         "fp8_kv": {"q": "bfloat16", "kv": FP8, "out": "bfloat16"},  # bf16 query, fp8 KV
         "fp8": {"q": FP8, "kv": FP8, "out": "bfloat16"}}  # vLLM's q_dtype fp8 case
# Every value of every parameter at least once: the sets, heads (4, 4),
# (8, 2), (5, 1), head sizes 96, 128, 256, windows none/64/128/256,
# soft-cap none/50, bf16 and both fp8 forms (C's tests/kv/test_attention.c
# covers the same way).
COVERING = [("a", (4, 4), 128, 0, 0.0, "bf16"), ("b", (8, 2), 128, 64, 50.0, "bf16"),
            ("a", (5, 1), 128, 128, 0.0, "bf16"), ("a", (8, 2), 96, 256, 0.0, "bf16"),
            ("b", (5, 1), 256, 0, 50.0, "bf16"), ("b", (4, 4), 256, 64, 0.0, "fp8_kv"),
            ("a", (8, 2), 128, 0, 50.0, "fp8_kv"), ("b", (5, 1), 96, 128, 0.0, "fp8"),
            ("a", (4, 4), 96, 0, 50.0, "fp8")]
FULL = list(itertools.product("ab", [(4, 4), (8, 2), (5, 1)], [96, 128, 256],
                              [0, 64, 128, 256], [0.0, 50.0], TYPES))
CASES = FULL if os.environ.get("CLBT_TEST_ATTENTION") == "full" else COVERING


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-%dx%d-d%d-w%d-cap%g-%s" % (
    c[0], c[1][0], c[1][1], c[2], c[3], c[4], c[5]))
def test_vllm_cases_on_host_tensors(case):
    # vLLM's call, keyword for keyword, on torch CPU tensors (numpy arrays
    # where torch is missing), on the default device as vLLM's test has
    # no device argument; the launch tensors are left as they were.
    seq_set, heads, head_size, window, softcap, types = case
    made = Case(SETS[seq_set], heads, head_size, TYPES[types], window, softcap,
                seed=CASES.index(case))
    launch = segments(heads[0], head_size, 8 * (CASES.index(case) % 2))
    arguments = made.arguments(HOST, **launch)
    clbt.vllm.unified_attention(**arguments)
    made.check(arguments["out"], TOLERANCES["fp8" if made.fp8 else "plain"])
    for name in ("softmax_segm_output", "softmax_segm_max", "softmax_segm_expsum"):
        assert (np.asarray(launch[name]) == 7.0).all(), name


# ---- other types, forms and options ---------------------------------------

SMALL = [(1, 40), (7, 30), (3, 3), (2, 70)]  # a decode, chunks, a whole prompt


@pytest.mark.parametrize("types, window, softcap, tolerance", [
    ({"q": "float16", "kv": "float16", "out": "float16"}, 0, 0.0, "plain"),
    ({"q": "float32", "kv": "float32", "out": "float32"}, 16, 2.0, "plain"),  # a cap that bites
    ({"q": "float16", "kv": "float16", "out": FP8}, 24, 0.0, "fp8_out"),  # vLLM's third
    ({"q": "bfloat16", "kv": "float16", "out": "float32"}, 0, 0.0, "plain"),
], ids=["fp16", "fp32-window-cap", "fp16-fp8-out", "mixed"])
def test_fp16_fp32_and_fp8_outputs(types, window, softcap, tolerance):
    made = Case(SMALL, (4, 2), 64, types, window, softcap, num_blocks=32, seed=3)
    arguments = made.arguments(HOST)
    clbt.vllm.unified_attention(**arguments)
    made.check(arguments["out"], TOLERANCES[tolerance],
               output_scale=0.5 if types["out"] == FP8 else 1.0)


def test_numpy_arrays_as_input():
    # numpy arrays in every run (torch or not): bf16 as uint16 bits, fp8 as
    # uint8 bits, scales as 0-dim float32 arrays
    made = Case(SMALL, (4, 1), 32, TYPES["fp8"], 0, 0.0, num_blocks=24, seed=4)
    arguments = made.arguments("numpy")
    clbt.vllm.unified_attention(**arguments)
    made.check(arguments["out"], TOLERANCES["fp8"])


def test_torch_tensors_as_input():
    # torch CPU tensors: bf16 as torch.bfloat16, fp8 as uint8 bits (this
    # torch may have float8: test_float8_tensors); the caller's out gets
    # the result.
    if torch is None:
        return  # the numpy path: test_numpy_arrays_as_input
    made = Case(SMALL, (4, 2), 32, TYPES["fp8_kv"], 32, 0.0, num_blocks=24, seed=5)
    arguments = made.arguments("torch")
    out = arguments["out"]
    clbt.vllm.unified_attention(**arguments)
    assert arguments["out"] is out and out.dtype == torch.bfloat16
    made.check(out, TOLERANCES["fp8"])


def test_a_host_out_that_is_a_view_gets_the_result_through_its_strides():
    # vLLM's out may be a view: the result lands through the caller's
    # strides (the first half of each row, poisoned), and the elements
    # beside them (bf16 1.0) are left as they were.
    made = Case(SMALL, (4, 2), 32, TYPES["bf16"], 0, 0.0, num_blocks=24, seed=18)
    tokens, heads, size = made.out.shape
    wide = np.full((tokens, heads, 2 * size), np.uint16(0x3F80))
    wide[:, :, :size] = made.out
    whole = host(wide, HOST, "bfloat16")
    arguments = made.arguments(HOST, out=whole[:, :, :size])
    clbt.vllm.unified_attention(**arguments)
    written = bits_of(whole)
    made.check(np.ascontiguousarray(written[:, :, :size]), TOLERANCES["plain"])
    assert (written[:, :, size:] == 0x3F80).all()


# torch.float8_e4m3fn tensors exist only in a torch that has them (Debian
# 12's 1.13 has not: vLLM's fp8 caches are uint8 bits there, tested
# above). The test is defined only there, rather than passing where it
# cannot run: the suite refuses a skip (tests/CMakeLists.txt).
if torch is not None and hasattr(torch, "float8_e4m3fn"):
    def test_float8_tensors():
        made = Case(SMALL, (4, 2), 32, dict(TYPES["fp8"], out=FP8), 0, 0.0, num_blocks=24,
                    seed=6)
        arguments = made.arguments("torch")
        for name in ("q", "k", "v", "out"):
            arguments[name] = arguments[name].view(torch.float8_e4m3fn)
        clbt.vllm.unified_attention(**arguments)
        made.check(arguments["out"].view(torch.uint8), TOLERANCES["fp8_out"], output_scale=0.5)


def test_the_packages_device_arrays(device):
    # clbt.DeviceArray inputs are used in place: out is written on the
    # device, its padding rows (past cu_seqlens_q[-1], as in vLLM's padded
    # batches) left as they were
    made = Case(SMALL, (6, 2), 64, TYPES["bf16"], 0, 50.0, num_blocks=32, seed=7)
    padding = poison((3, 6, 64), "bfloat16")
    arguments = made.arguments("device", device=device)
    arguments["q"] = clbt.DeviceArray.from_host(device, np.concatenate([made.q, padding]))
    arguments["out"] = clbt.DeviceArray.from_host(device, np.concatenate([made.out, padding]))
    clbt.vllm.unified_attention(**arguments)
    written = arguments["out"].numpy()
    made.check(written[:len(made.out)], TOLERANCES["plain"])
    assert (written[len(made.out):] == NAN_BITS["bfloat16"]).all()


@pytest.mark.parametrize("layout", ["kv_cache[:, 0] and [:, 1]", "split on the last dim"])
def test_caches_as_views_of_one_device_buffer(device, layout):
    # FlashInfer's kv_cache[:, 0] / [:, 1], and vLLM's Triton backend's
    # split of [blocks, block_size, heads, 2 x head_size] (K and V side by
    # side in each head): views of one buffer, read through their strides
    made = Case(SMALL, (4, 2), 32, TYPES["bf16"], 0, 0.0, num_blocks=16, seed=8)
    if layout.startswith("kv_cache"):
        whole = clbt.DeviceArray.from_host(device, np.stack([made.k, made.v], axis=1))
        k, v = whole[:, 0], whole[:, 1]
    else:
        whole = clbt.DeviceArray.from_host(device, np.concatenate([made.k, made.v], axis=3))
        k, v = whole[:, :, :, :32], whole[:, :, :, 32:]
    arguments = made.arguments("device", device=device, k=k, v=v)
    clbt.vllm.unified_attention(**arguments)
    made.check(arguments["out"], TOLERANCES["plain"])


def test_attention_on_pyopencl_arrays(device):
    cl_array = pytest.importorskip("pyopencl.array")
    made = Case(SMALL, (4, 2), 32, TYPES["fp8_kv"], 0, 0.0, num_blocks=16, seed=9)
    queue = device.queue
    arguments = made.arguments("numpy")
    for name in ("q", "k", "v", "out", "cu_seqlens_q", "seqused_k", "block_table",
                 "k_descale", "v_descale"):
        arguments[name] = cl_array.to_device(queue, arguments[name])
    clbt.vllm.unified_attention(**arguments)
    made.check(arguments["out"].get(), TOLERANCES["fp8"])


def test_descales_expanded_or_per_sequence_and_kv_head():
    # vLLM's backend passes its per-tensor scale expanded to [num_seqs,
    # num_kv_heads] (strides 0): one value. A [num_seqs, num_kv_heads]
    # array of different values is honoured per sequence and KV head
    # (vLLM's kernel reads its first element only: docs/python.md).
    made = Case(SMALL, (4, 2), 32, TYPES["fp8_kv"], 0, 0.0, num_blocks=24, seed=10)
    expanded = np.broadcast_to(np.float32(SCALES["k"]), (4, 2))
    assert expanded.strides == (0, 0)
    arguments = made.arguments("numpy", k_descale=expanded)
    clbt.vllm.unified_attention(**arguments)
    made.check(arguments["out"], TOLERANCES["fp8"])
    per = np.array([[0.5, 0.25], [1.0, 0.5], [0.75, 2.0], [0.5, 1.5]], np.float32)
    arguments = made.arguments("numpy", k_descale=per,
                               v_descale=per[::-1].copy())
    clbt.vllm.unified_attention(**arguments)
    k_raw, v_raw = from_e4m3(made.k), from_e4m3(made.v)
    expected = dense_attention(made.q_values, k_raw, v_raw, made.cu, made.used, made.table,
                               made.scale, k_scales=per, v_scales=per[::-1])[0]
    made.check(arguments["out"], TOLERANCES["fp8"], expected)


def test_sinks():
    # float32 sinks, and torch bf16 or numpy fp16 ones (whose values
    # float32 holds) converted
    made = Case(SMALL, (4, 2), 32, TYPES["bf16"], 0, 0.0, num_blocks=24, seed=11)
    sinks = np.array([0.5, -1.0, 2.0, 3.5], np.float32)
    expected = made.expected(sinks=sinks.astype(np.float64))[0]
    narrow = sinks.astype(np.float16) if torch is None else \
        host(to_bf16(sinks), "torch", "bfloat16")
    for given in (sinks, narrow):
        arguments = made.arguments(HOST, sinks=given)
        clbt.vllm.unified_attention(**arguments)
        made.check(arguments["out"], TOLERANCES["plain"], expected)


# ---- refusals --------------------------------------------------------------

UNSUPPORTED = [
    ("alibi_slopes", np.ones(4, np.float32)), ("qq_bias", np.ones((2, 2), np.float32)),
    ("mm_prefix_range", np.zeros((4, 1, 2), np.int32)),
    ("rswa_prefix_lens", np.zeros(4, np.int32)), ("rswa_window", 8),
    ("use_alibi_sqrt", True), ("k_scale_cache", np.ones((24, 16, 2), np.float32)),
    ("v_scale_cache", np.ones((24, 16, 2), np.float32)), ("chunk_lookback", 2)]
REFUSED = UNSUPPORTED + [
    ("kv_quant_mode", KVQuantMode.INT8_PER_TOKEN_HEAD, "INT8_PER_TOKEN_HEAD: clbt's "
     "attention does not support it"),
    ("kv_quant_mode", KVQuantMode.FP8_PER_TENSOR, "FP8_PER_TENSOR with a bfloat16 cache"),
    ("kv_quant_mode", "fp8", "kv_quant_mode is a str"),
    ("causal", False, "causal is False: clbt's attention is causal only"),
    ("causal", np.ones(4, bool), "no per-sequence tensor"),
    ("window_size", (7, 3), r"window_size\[1\] is 3"),
    ("window_size", (-2, 0), r"window_size\[0\] is -2"),
    ("softmax_scale", 0.0, "softmax_scale is 0.0; a scale above 0"),
    ("output_scale", np.float32(0.5), "output_scale is given with a bfloat16 out"),
    ("out", "shape", r"out has shape \(13, 4, 8\); q's is \(13, 4, 32\)"),
    ("v", "shape", r"v has shape \(24, 16, 2, 16\); k's is \(24, 16, 2, 32\)"),
    ("kv", "head", "k has head_size 16; q's is 32"),
    ("q", "dtype", "q has dtype float64"),
    ("v", "dtype", "v has dtype float16; k's is"),
    ("cu_seqlens_q", "int64", "cu_seqlens_q has dtype int64; int32 expected"),
    ("cu_seqlens_q", "short", "cu_seqlens_q has 4 entries; len.seqused_k. . 1 = 5"),
    ("block_table", "short", "block_table has 3 rows; len.seqused_k. = 4"),
    ("block_table", "float", "block_table has dtype float32; int32 expected"),
    ("sinks", "short", "sinks has 3 entries; q has 4 heads"),
    ("q", "list", "q is a list; a device array"),
]


def _bad(made, name, how):
    """A bad value for an argument, by what is wrong with it."""
    if how == "shape":
        return poison((13, 4, 8), "bfloat16") if name == "out" else made.v[..., :16].copy()
    if how == "dtype":
        return (made.q.astype(np.float64) if name == "q" else made.v.astype(np.float16))
    if how == "int64":
        return made.cu.astype(np.int64)
    if how == "short":
        return {"cu_seqlens_q": made.cu[:4], "block_table": made.table[:3],
                "sinks": np.zeros(3, np.float32)}[name]
    if how == "float":
        return made.table.astype(np.float32)
    return made.q.tolist()


@pytest.mark.parametrize("refusal", REFUSED, ids=lambda r: "%s-%s" % (r[0], str(r[1])[:12]))
def test_refused_arguments_are_named_and_nothing_is_written(refusal):
    name, value = refusal[:2]
    words = refusal[2] if len(refusal) > 2 else \
        "%s is .*: clbt's attention does not support it" % name
    made = Case(SMALL, (4, 2), 32, TYPES["bf16"], 0, 0.0, num_blocks=24, seed=12)
    if name == "kv":  # k and v of another head size
        changes = {"k": made.k[..., :16].copy(), "v": made.v[..., :16].copy()}
    elif isinstance(value, str) and name != "kv_quant_mode":
        changes = {name: _bad(made, name, value)}
    else:
        changes = {name: value}
    arguments = made.arguments("numpy", **changes)
    with pytest.raises(clbt.Error, match=words):
        clbt.vllm.unified_attention(**arguments)
    assert (arguments["out"] == NAN_BITS["bfloat16"]).all()


def test_fp8_query_needs_fp8_caches_and_its_descale():
    made = Case(SMALL, (4, 2), 32, TYPES["fp8"], 0, 0.0, num_blocks=24, seed=13)
    for changes, words in (({"q_descale": None}, "q_descale is None; an fp8 q needs it"),
                           ({"k_descale": None}, "k_descale is None; kv_quant_mode "
                            "FP8_PER_TENSOR needs it"),
                           ({"kv_quant_mode": KVQuantMode.NONE}, "q is fp8 with "
                            "kv_quant_mode NONE"),
                           ({"q_descale": np.float32(-1)}, "q_descale -1.0 is not a finite"),
                           ({"v_descale": np.zeros((4, 2), np.float32)},
                            "v_descale holds a value that is not finite and above 0")):
        arguments = made.arguments("numpy", **changes)
        with pytest.raises(clbt.Error, match=words):
            clbt.vllm.unified_attention(**arguments)
        assert (arguments["out"] == NAN_BITS["bfloat16"]).all()


def test_a_c_refusal_writes_nothing_to_a_device_out(device):
    # 6 query heads on 4 KV heads: C's descriptor refuses the shape
    made = Case(SMALL, (6, 3), 32, TYPES["bf16"], 0, 0.0, num_blocks=24, seed=14)
    k = np.concatenate([made.k, made.k[:, :, :1]], axis=2)
    arguments = made.arguments("device", device=device, k=k, v=k.copy())
    arguments["k"] = clbt.DeviceArray.from_host(device, k)
    arguments["v"] = clbt.DeviceArray.from_host(device, k.copy())
    with pytest.raises(clbt.InvalidArgumentError, match="num_heads"):
        clbt.vllm.unified_attention(**arguments)
    assert (arguments["out"].numpy() == NAN_BITS["bfloat16"]).all()


def test_value_first_in_one_buffer_is_refused(device):
    made = Case(SMALL, (4, 2), 32, TYPES["bf16"], 0, 0.0, num_blocks=16, seed=15)
    whole = clbt.DeviceArray.from_host(device, np.stack([made.v, made.k], axis=1))
    arguments = made.arguments("device", device=device, k=whole[:, 1], v=whole[:, 0])
    with pytest.raises(clbt.InvalidArgumentError, match="v starts at element 0 of k's"):
        clbt.vllm.unified_attention(**arguments)
    assert (arguments["out"].numpy() == NAN_BITS["bfloat16"]).all()


# ---- clbt.Attention over a clbt.KVCache -------------------------------------

def _descriptor_and_cache(device, made, **options):
    attention = clbt.Attention(device, num_heads=made.heads, num_kv_heads=made.kv_heads,
                               head_size=made.head_size, block_size=16,
                               cache_dtype=made.types["kv"], **options)
    k = clbt.DeviceArray.from_host(device, made.k)
    v = clbt.DeviceArray.from_host(device, made.v)
    cache = clbt.KVCache(device, k, v, num_kv_heads=made.kv_heads, head_size=made.head_size,
                         block_size=16, num_blocks=made.k.shape[0],
                         cache_dtype=made.types["kv"])
    return attention, cache


def test_attention_class_on_a_tables_rows_with_lse_and_rejected_tokens(device):
    # Block ids from a clbt.Table's committed rows through idx_mapping;
    # the log-sum-exp of every row; a row whose last block is past the
    # cache: that sequence's tokens that reach it get 0 and are counted.
    made = Case(SMALL, (4, 2), 32, TYPES["bf16"], 0, 0.0, num_blocks=24, seed=16)
    attention, cache = _descriptor_and_cache(device, made)
    rows = [2, 0, 3, 1]  # sequence s reads table row rows[s]
    table = clbt.Table(device, block_size=16, max_num_reqs=4, max_num_blocks_per_req=8,
                       max_num_batched_tokens=64)
    bad = made.table.copy()
    bad[3, 4] = 24  # sequence 3 (2 query tokens at positions 68, 69) reaches block 4
    for s, row in enumerate(rows):
        table.append_row(row, bad[s, :-(-int(made.used[s]) // 16)])
    table.commit(4)
    out = clbt.DeviceArray.from_host(device, made.out)
    lse = clbt.DeviceArray.from_host(device, np.full((len(made.out), 4), 7.0, np.float32))
    upload = lambda values: clbt.DeviceArray.from_host(device, values)  # noqa: E731
    attention.enqueue(cache, upload(made.q), out, upload(made.cu), upload(made.used),
                      table=table, idx_mapping=upload(np.array(rows, np.int32)), lse=lse)
    expected, expected_lse = made.expected()
    rejected = slice(made.cu[3], made.cu[4])
    expected[rejected], expected_lse[rejected] = 0.0, -np.inf
    made.check(out, TOLERANCES["plain"], expected)
    np.testing.assert_allclose(lse.numpy(), expected_lse, rtol=1e-5, atol=1e-5)
    assert attention.rejected_tokens == 2
    attention.reset_rejected_tokens()
    assert attention.rejected_tokens == 0
    table.close()


def test_attention_class_refuses_and_writes_nothing(device):
    made = Case(SMALL, (4, 2), 32, TYPES["bf16"], 0, 0.0, num_blocks=24, seed=17)
    attention, cache = _descriptor_and_cache(device, made)
    upload = lambda values: clbt.DeviceArray.from_host(device, values)  # noqa: E731
    q, cu, used, table = (upload(made.q), upload(made.cu), upload(made.used),
                          upload(made.table))
    out = upload(made.out)
    for call, words in (
            (lambda: attention.enqueue(cache, q, out, cu, used), "give one of block_table"),
            (lambda: attention.enqueue(cache, upload(made.q[:, :2]), out, cu, used,
                                       block_table=table),
             r"query has shape \(13, 2, 32\); the attention's heads are \[4, 32\]"),
            (lambda: attention.enqueue(cache, q, upload(made.out.astype(np.float16)), cu, used,
                                       block_table=table), "output has dtype float16"),
            (lambda: attention.enqueue(cache, q, out, upload(made.cu[:4]), used,
                                       block_table=table), "cu_seqlens_q has shape"),
            (lambda: attention.enqueue(cache, q, out, cu, used, block_table=table,
                                       max_blocks_per_seq=made.table.shape[1] + 1),
             "block_table's columns holds"),
            (lambda: attention.enqueue("cache", q, out, cu, used, block_table=table),
             "cache is a str")):
        with pytest.raises(clbt.Error, match=words):
            call()
    assert (out.numpy() == NAN_BITS["bfloat16"]).all()
    attention.close()
    with pytest.raises(clbt.InvalidArgumentError, match="attention descriptor is closed"):
        attention.enqueue(cache, q, out, cu, used, block_table=table)
