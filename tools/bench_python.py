"""What a decode step costs the host when Python drives clbt, and what one
binding call costs against the C it wraps.

The step is the one ../shared/anchors/seed_step.py times for vLLM's own
block table (its `host` column), on the same cases: 256 and 1024 requests
in one KV-cache group, 256 in four; rows of 64-512 blocks; each step one
row in sixteen gains a block in every group, then commit_block_table and
compute_slot_mapping, without waiting for the device. It is driven

  facade   through clbt.vllm's MultiGroupBlockTable call by call, as vLLM's
           code calls its own (append_row per row), with query_start_loc and
           positions already on the device, as the seed has them;
  +upload  the same, with query_start_loc and positions handed over as numpy
           arrays that the facade uploads every step;
  batch    with the step's appends in one append_rows call.

Each figure is the median of per-step times and the mean over the run (the
seed's way: total time / steps, no synchronisation); "updates" is the
median of the row updates alone, the part Python adds beside the commit's
and the kernel's enqueues. With --seed-json, the
JSON seed_step.py wrote, it prints each path's mean over the seed's host
time.

    python3 tools/bench_python.py [--iters N] [--rounds N] [--json FILE]
                                  [--seed-json FILE]

Needs numpy and libclbt.so (CLBT_LIBRARY, or the build tree's), and runs on
the device CLBT_DEVICE selects; PyOpenCL and torch are not needed.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import clbt  # noqa: E402
from clbt import _opencl, vllm  # noqa: E402
from clbt._library import lib  # noqa: E402

# name: (requests, kv block size per group, max_num_blocks per group), as seed_step.py
CASES = {
    "decode-256-1group": (256, [16], [8192]),
    "decode-1024-1group": (1024, [16], [8192]),
    "decode-256-4groups": (256, [16, 16, 32, 64], [8192, 8192, 4096, 2048]),
}
MAX_NUM_REQS = 1024
MAX_TOKENS = 16384


def device_array(device, values):
    """A device copy of a numpy array as a clbt.Buffer, through the
    package's own OpenCL calls (PyOpenCL may be missing)."""
    buffer = _opencl.create_buffer(lib.clbt_device_context(device._live()), values.nbytes)
    _opencl.write(lib.clbt_device_queue(device._live()), buffer.int_ptr, values.ctypes.data,
                  values.nbytes).wait()
    return buffer


def timed(step, iters):
    """(median of per-step times, mean over the run), microseconds."""
    for _ in range(20):
        step()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        step()
        samples.append(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(iters):
        step()
    mean = (time.perf_counter() - start) / iters
    return statistics.median(samples) * 1e6, mean * 1e6


def run_case(device, requests, block_sizes, max_blocks, iters):
    table = vllm.MultiGroupBlockTable(
        max_num_reqs=MAX_NUM_REQS, max_num_batched_tokens=MAX_TOKENS, pin_memory=False,
        device=device, block_sizes=block_sizes, kernel_block_sizes=block_sizes,
        max_num_blocks=max_blocks)
    rng = np.random.default_rng(1)
    lengths = rng.integers(64, 512, size=requests)  # blocks per request in the first group
    for r in range(requests):
        table.add_row(tuple(list(rng.integers(1, 1 << 20, size=max(1, int(lengths[r]) * 16 // bs)))
                            for bs in block_sizes), r)
    table.commit_block_table(requests)
    qsl = np.arange(requests + 1, dtype=np.int32)
    positions = (lengths * 16 - 1).astype(np.int64)
    qsl_device, positions_device = device_array(device, qsl), device_array(device, positions)
    groups = len(block_sizes)
    counter = [0]

    def rows_of_step():
        k = counter[0] % 16
        counter[0] += 1
        return range(k, requests, 16)

    def facade_updates():
        for r in rows_of_step():
            table.append_row(tuple([int(rng.integers(1, 1 << 20))] for _ in block_sizes), r)

    def batch_updates():
        rows = np.arange(counter[0] % 16, requests, 16, dtype=np.uint32)
        counter[0] += 1
        ones = np.ones(rows.size, np.uint32)
        table.append_rows(rows, [ones] * groups,
                          [rng.integers(1, 1 << 20, size=rows.size, dtype=np.int32)
                           for _ in range(groups)])

    def on_device(updates):
        def step():
            updates()
            table.commit_block_table(requests)
            table.compute_slot_mapping(requests, qsl_device, positions_device,
                                       num_tokens=requests)
        return step

    def uploading():
        facade_updates()
        table.commit_block_table(requests)
        table.compute_slot_mapping(requests, qsl, positions)

    result = {"requests": requests, "groups": groups}
    for name, step in (("facade", on_device(facade_updates)), ("facade_upload", uploading),
                       ("batch", on_device(batch_updates))):
        median, mean = timed(step, iters)
        device.finish()
        result[name + "_median_us"], result[name + "_mean_us"] = median, mean
    # The row updates alone: what Python adds, apart from the commit's and
    # the kernel's enqueues.
    for name, updates in (("facade", facade_updates), ("batch", batch_updates)):
        result[name + "_updates_us"] = timed(updates, iters)[0]
    expected = table[0]._table.compute_slot_mapping_host(requests, qsl, positions)
    assert (table[0].slot_mapping.np == expected).all(), "the last step's slots are wrong"
    table.close()
    for buffer in (qsl_device, positions_device):
        buffer.close()
    return result


def per_call_us(call, calls):
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def binding_costs(device, runs):
    """Medians of `runs` rounds: a ctypes call of clbt_table_width (the C
    function is a few instructions, so this is the binding alone), a
    one-block append through Table.append_row and through the facade, and
    the same append in C, timed as one entry of a 100000-entry
    append_rows call."""
    rows, calls = 1024, 2000
    with clbt.Table(device, block_size=16, max_num_reqs=rows, max_num_blocks_per_req=8192,
                    max_num_batched_tokens=16) as table:
        facade = vllm.BlockTable._of(table, False, device, vllm.SlotMappingMode.TOKEN_TO_KV_SLOT,
                                     1, 1, 0)
        handle, one = table._live(), [7]
        entries = np.arange(100000, dtype=np.uint32) % rows
        ones = np.ones(entries.size, np.uint32)
        ids = np.full(entries.size, 7, np.int32)
        figures = {"ctypes_width": [], "table_append_row": [], "facade_append_row": [],
                   "c_append_row": []}
        for _ in range(runs):
            table.clear()
            figures["ctypes_width"].append(per_call_us(lambda: lib.clbt_table_width(handle), calls))
            row = iter(range(10 ** 9))
            figures["table_append_row"].append(
                per_call_us(lambda: table.append_row(next(row) % rows, one), calls))
            figures["facade_append_row"].append(
                per_call_us(lambda: facade.append_row(one, next(row) % rows), calls))
            table.clear()
            start = time.perf_counter()
            table.append_rows(entries, ones, ids)
            figures["c_append_row"].append((time.perf_counter() - start) / entries.size * 1e6)
    return {name: statistics.median(values) for name, values in figures.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=21, help="of the binding costs")
    parser.add_argument("--json")
    parser.add_argument("--seed-json", help="seed_step.py's --json output, for ratios")
    args = parser.parse_args()
    seed = {}
    if args.seed_json:
        with open(args.seed_json) as f:
            seed = json.load(f)
    device = clbt.Device()
    print("clbt %s from %s on %s, PyOpenCL %s" % (
        clbt.__version__, clbt.library_path, device.selector,
        "present" if _opencl.pyopencl else "absent"))
    results = {"device": device.selector, "pyopencl": _opencl.pyopencl is not None, "cases": {}}
    print("\nhost time of a decode step driven from Python, us: median of steps / mean over "
          "%d steps" % args.iters)
    print("%-20s %17s %17s %17s %9s %9s %9s %12s %12s" % (
        "case", "facade", "facade+upload", "batch", "updates", "updates", "seed",
        "facade/seed", "batch/seed"))
    print("%-20s %17s %17s %17s %9s %9s" % ("", "", "", "", "facade", "batch"))
    for name, (requests, block_sizes, max_blocks) in CASES.items():
        r = run_case(device, requests, block_sizes, max_blocks, args.iters)
        results["cases"][name] = r
        host = seed.get(name, {}).get("host_us")
        ratios = ("%12.3f %12.3f" % (r["facade_mean_us"] / host, r["batch_mean_us"] / host)
                  if host else "%12s %12s" % ("-", "-"))
        if host:
            r["seed_host_us"] = host
        print("%-20s %8.1f/%8.1f %8.1f/%8.1f %8.1f/%8.1f %9.1f %9.1f %9s %s" % (
            name, r["facade_median_us"], r["facade_mean_us"], r["facade_upload_median_us"],
            r["facade_upload_mean_us"], r["batch_median_us"], r["batch_mean_us"],
            r["facade_updates_us"], r["batch_updates_us"], "%.1f" % host if host else "-",
            ratios))
    costs = binding_costs(device, args.rounds)
    results["binding"] = costs
    c = costs["c_append_row"]
    print("\none call, us (medians of %d rounds of 2000 calls)" % args.rounds)
    print("  ctypes call of clbt_table_width       %7.3f" % costs["ctypes_width"])
    print("  Table.append_row(row, [id])           %7.3f  (%.0fx the C append)" % (
        costs["table_append_row"], costs["table_append_row"] / c))
    print("  BlockTable.append_row([id], row)      %7.3f  (%.0fx the C append)" % (
        costs["facade_append_row"], costs["facade_append_row"] / c))
    print("  the C append, per entry of a batch    %7.3f" % c)
    device.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
