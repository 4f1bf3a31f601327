"""The floor of the Triton anchor's timings: an empty Triton kernel, timed as
shared/anchors/triton_slot_mapping.py times the seed's kernel (do_bench's
median, launch + synchronize, CUDA-graph replay + synchronize). Read the
anchor's figures against it, as clbt's against an empty OpenCL kernel.

    python3 tools/gpu/triton_floor.py [--iters N]
"""
import argparse, time
import torch, triton, triton.language as tl
from triton.testing import do_bench


@triton.jit
def _empty(out_ptr, FLAG: tl.constexpr):
    if FLAG:  # never taken: the kernel does nothing, but has an argument
        tl.store(out_ptr, 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=2000)
    iters = ap.parse_args().iters
    out = torch.empty(1, dtype=torch.int64, device="cuda")

    def launch():
        _empty[(2,)](out, FLAG=False)

    launch(); torch.cuda.synchronize()
    kernel_us = do_bench(launch, warmup=50, rep=300, return_mode="median") * 1e3
    t0 = time.perf_counter()
    for _ in range(iters):
        launch(); torch.cuda.synchronize()
    sync_us = (time.perf_counter() - t0) / iters * 1e6
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    graph.replay(); torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(iters):
        graph.replay(); torch.cuda.synchronize()
    graph_us = (time.perf_counter() - t0) / iters * 1e6
    print(f"{'empty triton kernel':24s} kernel {kernel_us:7.2f} us  launch+sync {sync_us:7.1f} us  "
          f"graph+sync {graph_us:6.1f} us", flush=True)


if __name__ == "__main__":
    main()
