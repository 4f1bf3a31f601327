"""What a decode step costs the host when Python drives clbt through
clbt.vllm, side by side in one process with vLLM's own block table for the
same calls, and what one binding call costs against the C it wraps.

The step is ../shared/anchors/seed_step.py's, on its cases: 256 and 1024
requests in one KV-cache group, 256 in four; rows of 64-512 blocks; each
step one row in sixteen gains a block in every group, then
commit_block_table and compute_slot_mapping, without waiting for the
device. The block ids of every step are drawn before the timing (the seed
draws them inside its loop, which times numpy's generator too). Paths:

  vllm     vLLM's own MultiGroupBlockTable, loaded from --vllm (its
           block_table.py, read from outside this repository) with
           stand-ins for its vllm imports: on a CUDA machine with Triton,
           torch's CUDA tensors and the real kernel; elsewhere its device
           copy and its kernel launch are stood in by nothing, so that only
           its host work counts and the ratios below are upper bounds;
  facade   clbt.vllm's MultiGroupBlockTable, call by call as vLLM's code
           calls its own (append_row per row), query_start_loc and
           positions already on the device, as vLLM has them;
  upload   the same, handed query_start_loc and positions as numpy arrays;
  batch    the step's appends in one append_rows call.

Paths are timed in turn at every step; each figure is the median of per-step
host times in microseconds, and the ratios are of medians. "updates" is the
row updates alone.

    python3 tools/bench/bench_python.py [--iters N] [--rounds N] [--json FILE]
                                  [--vllm PATH]

Needs numpy, torch (for the vllm path) and libclbt.so (CLBT_LIBRARY, or
the build tree's), and runs on the device CLBT_DEVICE selects.
"""
import argparse
import ctypes
import json
import logging
import os
import statistics
import sys
import time
import types
from typing import Generic, TypeVar

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")  # the repository's
sys.path.insert(0, os.path.join(ROOT, "python"))
import clbt  # noqa: E402
from clbt import _kv_cache as kv_cache  # noqa: E402
from clbt import _opencl, vllm  # noqa: E402
from clbt._device_array import DeviceArray, Memory  # noqa: E402
from clbt._library import lib  # noqa: E402

REFERENCE = os.path.join(ROOT, "..", "shared", "reference", "block_table.py")

# name: (requests, kv block size per group, max_num_blocks per group), as seed_step.py
CASES = {
    "decode-256-1group": (256, [16], [8192]),
    "decode-1024-1group": (1024, [16], [8192]),
    "decode-256-4groups": (256, [16, 16, 32, 64], [8192, 8192, 4096, 2048]),
}
MAX_NUM_REQS = 1024
MAX_TOKENS = 16384
STEPS_PLANNED = 64  # distinct steps of ids, cycled


def _module(name, **attrs):
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        module.__path__ = []
        sys.modules[name] = module
    module.__dict__.update(attrs)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(_module(parent), child, module)
    return module


class _Launch:
    """A stand-in Triton kernel: kernel[grid](...) does nothing."""

    def __init__(self, function):
        self.function = function

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def _jit(function=None, **options):
    return _Launch(function) if function is not None else _Launch


K = TypeVar("K")


class _VllmJitKernel(Generic[K]):
    def register_warmup(self, **kwargs):  # the first call compiles instead
        pass


def load_vllm(path):
    """vLLM's block_table.py with stand-ins for what it imports; returns
    (module, torch device, whether its device work runs)."""
    import torch
    triton = types.SimpleNamespace(jit=_jit)
    tl = types.SimpleNamespace(constexpr=int)
    cuda = torch.cuda.is_available()
    if cuda:
        try:
            import triton
            import triton.language as tl
        except ImportError:
            cuda = False

    class CpuGpuBuffer:
        """vLLM's CpuGpuBuffer: a CPU tensor, its numpy view, a device
        tensor; without CUDA the device copy is stood in by nothing."""

        def __init__(self, *size, dtype, device, pin_memory, with_numpy=True):
            self.cpu = torch.zeros(*size, dtype=dtype, device="cpu", pin_memory=pin_memory)
            self.gpu = torch.zeros_like(self.cpu, device=device)
            self.np = self.cpu.numpy()

        def copy_to_gpu(self, n=None):
            if not cuda:
                return self.gpu
            if n is None:
                return self.gpu.copy_(self.cpu, non_blocking=True)
            return self.gpu[:n].copy_(self.cpu[:n], non_blocking=True)

    def not_initialised():
        raise AssertionError("group is not initialized")

    if not hasattr(torch, "SymInt"):
        torch.SymInt = type("SymInt", (), {})
    _module("vllm.distributed", get_dcp_group=not_initialised, get_pcp_group=not_initialised)
    _module("vllm.logger", init_logger=logging.getLogger)
    _module("vllm.model_executor.warmup.jit_warmup", VllmJitKernel=_VllmJitKernel)
    _module("vllm.model_executor.warmup.jit_warmup_triton_helper",
            TritonWarmupTensor=lambda dtype: None, triton_scalar_specialization_rep=lambda v: v)
    _module("vllm.triton_utils", tl=tl, triton=triton)
    _module("vllm.utils.math_utils", cdiv=lambda a, b: -(a // -b))
    _module("vllm.v1.attention.backends.utils", PAD_SLOT_ID=-1)
    _module("vllm.v1.utils", CpuGpuBuffer=CpuGpuBuffer)
    module = types.ModuleType("vllm_block_table")
    module.__file__ = path
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), module.__dict__)
    return module, torch.device("cuda" if cuda else "cpu"), cuda


def device_array(device, values):
    """values copied into a new device buffer, as a clbt DeviceArray."""
    context = lib.clbt_device_context(device._live())
    queue = lib.clbt_device_queue(device._live())
    buffer = _opencl.create_buffer(context, values.nbytes)
    _opencl.write(queue, buffer.int_ptr, values.ctypes.data, values.nbytes).wait()
    memory = Memory(buffer.int_ptr, queue, values.nbytes)
    buffer.close()  # the Memory holds its own reference
    return DeviceArray(memory, values.shape, values.dtype)


def plan_steps(rng, requests, groups):
    """Each planned step's rows (one in sixteen) and one new id per group
    per row, as Python lists and as the batch call's arrays."""
    plan = []
    for step in range(STEPS_PLANNED):
        rows = list(range(step % 16, requests, 16))
        ids = [[[int(i)] for i in rng.integers(1, 1 << 20, size=groups)] for _ in rows]
        flat = [np.array([row_ids[g][0] for row_ids in ids], np.int32) for g in range(groups)]
        plan.append((rows, [tuple(row_ids) for row_ids in ids],
                     np.array(rows, np.uint32), np.ones(len(rows), np.uint32), flat))
    return plan


def build(make, requests, block_sizes, max_blocks, lengths, rng_seed):
    table = make(block_sizes, max_blocks)
    rng = np.random.default_rng(rng_seed)
    for r in range(requests):
        table.add_row(tuple(list(int(i) for i in rng.integers(
            1, 1 << 20, size=max(1, int(lengths[r]) * 16 // bs))) for bs in block_sizes), r)
    table.commit_block_table(requests)
    return table


def run_case(device, reference, requests, block_sizes, max_blocks, iters):
    rng = np.random.default_rng(1)
    lengths = rng.integers(64, 512, size=requests)  # blocks per request in the first group
    groups = len(block_sizes)
    plan = plan_steps(rng, requests, groups)
    qsl = np.arange(requests + 1, dtype=np.int32)
    positions = (lengths * 16 - 1).astype(np.int64)

    def clbt_table(sizes, blocks):
        return vllm.MultiGroupBlockTable(MAX_NUM_REQS, MAX_TOKENS, False, device, sizes, sizes,
                                         blocks)

    facade = build(clbt_table, requests, block_sizes, max_blocks, lengths, 2)
    batch = build(clbt_table, requests, block_sizes, max_blocks, lengths, 2)
    qsl_device, positions_device = device_array(device, qsl), device_array(device, positions)
    paths = {}
    step_of = {}

    def steps(name):
        k = step_of.get(name, 0)
        step_of[name] = k + 1
        return plan[k % STEPS_PLANNED]

    def facade_updates():
        rows, ids = steps("facade")[:2]
        for row, row_ids in zip(rows, ids):
            facade.append_row(row_ids, row)

    def facade_step():
        facade_updates()
        facade.commit_block_table(requests)
        facade.compute_slot_mapping(requests, qsl_device, positions_device)

    def upload_step():
        facade_updates()
        facade.commit_block_table(requests)
        facade.compute_slot_mapping(requests, qsl, positions)

    def batch_updates():
        _, _, rows, ones, flat = steps("batch")
        batch.append_rows(rows, [ones] * groups, flat)

    def batch_step():
        batch_updates()
        batch.commit_block_table(requests)
        batch.compute_slot_mapping(requests, qsl_device, positions_device)

    def step_alone():
        batch.commit_block_table(requests)
        batch.compute_slot_mapping(requests, qsl_device, positions_device)

    paths["facade"] = facade_step
    paths["upload"] = upload_step
    paths["batch"] = batch_step
    paths["step"] = step_alone
    updates = {"facade": facade_updates, "batch": batch_updates}
    if reference is not None:
        module, torch_device, _ = reference
        import torch

        def vllm_table(sizes, blocks):
            return module.MultiGroupBlockTable(
                max_num_reqs=MAX_NUM_REQS, max_num_batched_tokens=MAX_TOKENS,
                pin_memory=torch_device.type == "cuda", device=torch_device,
                block_sizes=sizes, kernel_block_sizes=sizes, max_num_blocks=blocks)

        own = build(vllm_table, requests, block_sizes, max_blocks, lengths, 2)
        qsl_own = torch.tensor(qsl, device=torch_device)
        positions_own = torch.tensor(positions, device=torch_device)

        def vllm_updates():
            rows, ids = steps("vllm")[:2]
            for row, row_ids in zip(rows, ids):
                own.append_row(row_ids, row)

        def vllm_step():
            vllm_updates()
            own.commit_block_table(requests)
            own.compute_slot_mapping(requests, qsl_own, positions_own)

        paths["vllm"] = vllm_step
        updates["vllm"] = vllm_updates

    samples = {name: [] for name in list(paths) + ["%s_updates" % n for n in updates]}
    for _ in range(20):
        for step in list(paths.values()) + list(updates.values()):
            step()
    for _ in range(iters):  # interleaved: every path at every iteration
        for name, step in list(paths.items()) + [("%s_updates" % n, u) for n, u in
                                                  updates.items()]:
            start = time.perf_counter()
            step()
            samples[name].append(time.perf_counter() - start)
    device.finish()
    result = {"requests": requests, "groups": groups}
    for name, values in samples.items():
        result[name + "_us"] = statistics.median(values) * 1e6
    if "vllm_us" in result:
        for name in ("facade", "upload", "batch"):
            result[name + "_ratio"] = result[name + "_us"] / result["vllm_us"]
        result["facade_updates_ratio"] = result["facade_updates_us"] / result["vllm_updates_us"]
    # the last step's slots, against clbt's host reference
    expected = facade[0]._engine.groups[0].compute_slot_mapping_host(requests, qsl, positions)
    assert (facade[0].slot_mapping.np == expected).all(), "the last step's slots are wrong"
    facade.close()
    batch.close()
    return result


def per_call_us(call, calls):
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def binding_costs(device, runs):
    """Medians of `runs` rounds: a ctypes call of clbt_table_width (a few
    instructions of C: the binding alone), a one-block append through
    Table.append_row, through the same method without the table's lock
    (its __wrapped__ function: what the lock costs a call) and through the
    facade, and the same append in C, timed as one entry of a
    100000-entry append_rows call."""
    rows, calls = 1024, 2000
    with clbt.Table(device, block_size=16, max_num_reqs=rows, max_num_blocks_per_req=8192,
                    max_num_batched_tokens=16) as table:
        facade = vllm.BlockTable(16, rows, 8192, 16, False, device, 16, 1)
        handle, one = table._live(), [7]
        entries = np.arange(100000, dtype=np.uint32) % rows
        ones = np.ones(entries.size, np.uint32)
        ids = np.full(entries.size, 7, np.int32)
        figures = {"ctypes_width": [], "table_append_row": [], "unlocked_append_row": [],
                   "facade_append_row": [], "c_append_row": []}
        unlocked = clbt.Table.append_row.__wrapped__
        for _ in range(runs):
            table.clear()
            facade.clear()
            figures["ctypes_width"].append(per_call_us(lambda: lib.clbt_table_width(handle), calls))
            row = iter(range(10 ** 9))
            figures["table_append_row"].append(
                per_call_us(lambda: table.append_row(next(row) % rows, one), calls))
            table.clear()
            figures["unlocked_append_row"].append(
                per_call_us(lambda: unlocked(table, next(row) % rows, one), calls))
            start = time.perf_counter()
            for _ in range(calls):
                facade.append_row(one, next(row) % rows)
            facade.num_blocks_per_row  # timed as 0.5 gave its recorded appends to C here
            figures["facade_append_row"].append((time.perf_counter() - start) / calls * 1e6)
            table.clear()
            start = time.perf_counter()
            table.append_rows(entries, ones, ids)
            figures["c_append_row"].append((time.perf_counter() - start) / entries.size * 1e6)
        facade.close()
    return {name: statistics.median(values) for name, values in figures.items()}


def kv_write_costs(device, runs):
    """Medians of `runs` rounds of 500 calls: KVCache.write of a decode
    (256 tokens of 8 KV heads x 128, fp16, K and V views of one qkv array,
    into a one-buffer cache of 1024 blocks of 16), the same write through
    clbt.vllm.reshape_and_cache_flash (vLLM's shapes: the cache's two
    halves kv[:, 0] and kv[:, 1]), and its bare C call
    (clbt_kv_cache_enqueue_write with its struct made once): the package's
    work a layer's write adds. Every slot is -1, so that the
    kernels, the same on both sides, skip every token: on a CPU device
    they would otherwise share the host's cores with the loop they are
    timed against. Neither side reads the slots on the host. The queue is
    finished after each round."""
    heads, head, block, blocks, tokens, calls = 8, 128, 16, 1024, 256, 500
    row = heads * head
    cache_array = device_array(device, np.zeros((blocks, 2, block, heads, head), np.float16))
    qkv = device_array(device, np.zeros((tokens, 3 * row), np.float16))
    slots = device_array(device, np.full(tokens, -1, np.int64))
    figures = {"kv_write": [], "facade_kv_write": [], "c_kv_write": []}
    kv_halves = [cache_array[:, half] for half in (0, 1)]
    key, value = (qkv.view(tokens, 3, heads, head)[:, part] for part in (1, 2))
    with clbt.KVCache(device, cache_array, num_kv_heads=heads, head_size=head,
                      block_size=block, num_blocks=blocks, cache_dtype="float16") as cache:
        strides = dict(key_offset=row, value_offset=2 * row, key_token_stride=3 * row,
                       value_token_stride=3 * row)
        request = kv_cache.KVWrite(num_tokens=tokens, key=qkv.cl_mem, value=qkv.cl_mem,
                                   slot_mapping=slots.cl_mem, k_scale=1.0, v_scale=1.0,
                                   **strides)
        handle = cache._live()
        for _ in range(runs):
            figures["kv_write"].append(per_call_us(
                lambda: cache.write(qkv, qkv, slots, **strides), calls))
            device.finish()
            figures["facade_kv_write"].append(per_call_us(
                lambda: vllm.reshape_and_cache_flash(key, value, *kv_halves, slots, "auto",
                                                     1.0, 1.0), calls))
            device.finish()
            figures["c_kv_write"].append(per_call_us(
                lambda: lib.clbt_kv_cache_enqueue_write(handle, ctypes.byref(request), 0,
                                                        None, None), calls))
            device.finish()
    return {name: statistics.median(values) for name, values in figures.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=21, help="of the binding costs")
    parser.add_argument("--json")
    parser.add_argument("--vllm", default=REFERENCE if os.path.exists(REFERENCE) else None,
                        help="vLLM's block_table.py (default: ../shared/reference's when "
                             "present); 'none' to leave it out")
    args = parser.parse_args()
    reference = None
    if args.vllm and args.vllm != "none":
        try:
            reference = load_vllm(args.vllm)
        except ImportError as error:  # no torch: clbt's paths alone
            print("vLLM's block table left out: %s" % error)
    device = clbt.Device()
    print("clbt %s from %s on %s, PyOpenCL %s" % (
        clbt.__version__, clbt.library_path, device.selector,
        "present" if _opencl.pyopencl else "absent"))
    if reference is not None:
        print("vLLM's block table from %s, %s" % (args.vllm, "on CUDA with Triton" if
              reference[2] else "host work only (no CUDA: its copy and launch do nothing)"))
    results = {"device": device.selector, "pyopencl": _opencl.pyopencl is not None,
               "vllm_device_work": bool(reference and reference[2]), "cases": {}}
    print("\nhost time of a decode step, us: medians of %d interleaved steps (step: "
          "commit_block_table and compute_slot_mapping with no row changed)" % args.iters)
    print("%-20s %8s %8s %8s %8s %8s %9s %9s %9s %8s %8s %8s" % (
        "case", "vllm", "facade", "upload", "batch", "step", "upd:vllm", "upd:fac", "upd:batch",
        "fac/vllm", "upl/vllm", "bat/vllm"))
    for name, (requests, block_sizes, max_blocks) in CASES.items():
        r = run_case(device, reference, requests, block_sizes, max_blocks, args.iters)
        results["cases"][name] = r
        show = lambda key, form="%8.1f": form % r[key] if key in r else "%8s" % "-"  # noqa
        print("%-20s %s %s %s %s %s %s %s %s %s %s %s" % (
            name, show("vllm_us"), show("facade_us"), show("upload_us"), show("batch_us"),
            show("step_us"),
            show("vllm_updates_us", "%9.1f"), show("facade_updates_us", "%9.1f"),
            show("batch_updates_us", "%9.1f"), show("facade_ratio", "%8.3f"),
            show("upload_ratio", "%8.3f"), show("batch_ratio", "%8.3f")))
    costs = binding_costs(device, args.rounds)
    results["binding"] = costs
    c = costs["c_append_row"]
    print("\none call, us (medians of %d rounds of 2000 calls)" % args.rounds)
    print("  ctypes call of clbt_table_width       %7.3f" % costs["ctypes_width"])
    print("  Table.append_row(row, [id])           %7.3f  (%.0fx the C append)" % (
        costs["table_append_row"], costs["table_append_row"] / c))
    print("  the same without the table's lock     %7.3f  (locked / unlocked %.2f)" % (
        costs["unlocked_append_row"], costs["table_append_row"] / costs["unlocked_append_row"]))
    print("  BlockTable.append_row([id], row)      %7.3f  (%.0fx the C append)" % (
        costs["facade_append_row"], costs["facade_append_row"] / c))
    print("  the C append, per entry of a batch    %7.3f" % c)
    kv = kv_write_costs(device, args.rounds)
    results["kv_write"] = kv
    print("\na layer's KV-cache write, us (medians of %d rounds of 500 calls)" % args.rounds)
    print("  KVCache.write, a 256-token decode     %7.1f  (%.2fx the C call)" % (
        kv["kv_write"], kv["kv_write"] / kv["c_kv_write"]))
    print("  reshape_and_cache_flash, the same     %7.1f  (%.2fx the C call)" % (
        kv["facade_kv_write"], kv["facade_kv_write"] / kv["c_kv_write"]))
    print("  the same write's C call               %7.1f" % kv["c_kv_write"])
    device.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
