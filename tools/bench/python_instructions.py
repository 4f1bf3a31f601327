"""The instructions the host spends on the facade's row updates and decode
step, counted by callgrind: two versions a few percent apart cannot be told
apart by wall-clock medians on a shared machine (docs/benchmarks.md,
"Python asks C").

    valgrind --tool=callgrind --separate-threads=yes --collect-atstart=no \\
        --toggle-collect='qsort*' --callgrind-out-file=out \\
        python3 tools/bench/python_instructions.py WORK N
    grep totals out-01    # the main thread's; divide by N

WORK is one of bench_python.py's cases (N of its decode steps through the
facade: append_row per growing row, commit_block_table and
compute_slot_mapping on device inputs), or append_row alone on a
BlockTable (bt1), a MultiGroupBlockTable of one group (mg1) or of four
(mg4): N calls, then a read of the lengths, where 0.5 gave its recorded
updates to C. The counted work runs once inside libc's qsort, as its
comparator, so that --toggle-collect counts it and nothing else; PoCL's
own threads are counted apart (--separate-threads).
"""
import ctypes
import sys

import numpy as np

import bench_python as bench
import clbt
from clbt import vllm

ROWS = 1024
ONE_ROW = {"bt1": [7], "mg1": ([7],), "mg4": ([7], [7], [7], [7])}


def decode_steps(device, case):
    """One bench_python step a call, the k-th planned one."""
    requests, block_sizes, max_blocks = bench.CASES[case]
    rng = np.random.default_rng(1)
    lengths = rng.integers(64, 512, size=requests)
    plan = bench.plan_steps(rng, requests, len(block_sizes))
    table = bench.build(lambda sizes, blocks: vllm.MultiGroupBlockTable(
        bench.MAX_NUM_REQS, bench.MAX_TOKENS, False, device, sizes, sizes, blocks),
        requests, block_sizes, max_blocks, lengths, 2)
    qsl = bench.device_array(device, np.arange(requests + 1, dtype=np.int32))
    positions = bench.device_array(device, (lengths * 16 - 1).astype(np.int64))

    def step(k):
        rows, ids = plan[k % bench.STEPS_PLANNED][:2]
        for row, row_ids in zip(rows, ids):
            table.append_row(row_ids, row)
        table.commit_block_table(requests)
        table.compute_slot_mapping(requests, qsl, positions)
    return step


def appends(device, work, n):
    """n one-id appends, then the read of the lengths."""
    if work == "bt1":
        table = vllm.BlockTable(16, ROWS, 8192, 16, False, device, 16, 1)
        lengths = lambda: table.num_blocks_per_row  # noqa: E731
    else:
        sizes = [16] if work == "mg1" else [16, 16, 32, 64]
        table = vllm.MultiGroupBlockTable(ROWS, 16, False, device, sizes, sizes,
                                          [8192, 8192, 4096, 2048][:len(sizes)])
        lengths = lambda: table[0].num_blocks_per_row  # noqa: E731
    ids = ONE_ROW[work]

    def run(_):
        for i in range(n):
            table.append_row(ids, i % ROWS)
        lengths()
    return run


def main():
    work, n = sys.argv[1], int(sys.argv[2])
    device = clbt.Device()
    if work in ONE_ROW:
        counted, repeat = appends(device, work, n), 1
    else:
        counted, repeat = decode_steps(device, work), n
        for k in range(3):  # warm: kernels built, buffers seen
            counted(k)
    device.finish()
    done = []

    def compare(a, b):
        if not done:
            done.append(True)
            for k in range(repeat):
                counted(k)
        return 0
    comparator = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(compare)
    pair = (ctypes.c_int * 2)(0, 1)
    ctypes.CDLL(None).qsort(pair, 2, ctypes.sizeof(ctypes.c_int), comparator)
    device.finish()


if __name__ == "__main__":
    main()
