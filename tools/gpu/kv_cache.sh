#!/usr/bin/env bash
# clbt's KV-cache write on an NVIDIA GPU (issue 26), against vLLM's own
# Triton kernel, in one device call:
#
#   tools/gpu/kv_cache.sh VLLM_DIR OUT_DIR [RUNS]
#
# VLLM_DIR is the git-ignored .vllm/ folder (carried to the device): vLLM's
# vllm/v1/attention/ops/triton_reshape_and_cache_flash.py with stand-ins
# for the two vllm modules it imports (.vllm/README). Builds clbt without
# the tests, lists the devices, runs examples/paged_attention on the GPU
# (a prefill and decodes attended over the cache the write filled), the
# bench's kv_cache section (the prefill write against clEnqueueCopyBuffer,
# the decode write against an empty kernel), then tools/gpu/kv_cache_triton.py
# (caches bit for bit against Triton and the reference, on vLLM's
# test_cache.py shapes, and Triton's times beside clbt's). Needs torch with
# CUDA, Triton and the NVIDIA OpenCL driver (CLBT_DEVICE=nvidia:gpu unless
# set; PYTHON names the interpreter, default python3). Everything printed lands in OUT_DIR; the exit status is nonzero if
# any part failed or differed.
set -euo pipefail
vllm=$1 out=$2 runs=${3:-500}
upstream="$vllm/vllm/v1/attention/ops/triton_reshape_and_cache_flash.py"
[ -f "$upstream" ] || { echo "tools/gpu/kv_cache.sh: no $upstream" >&2; exit 2; }
mkdir -p "$out"
export CLBT_DEVICE=${CLBT_DEVICE:-nvidia:gpu}
python=${PYTHON:-python3} # the one with torch and Triton

cmake -S . -B build-gpu -DCLBT_BUILD_TESTS=OFF > "$out/build.txt" 2>&1
cmake --build build-gpu -j"$(nproc)" >> "$out/build.txt" 2>&1
./build-gpu/clbt devices | tee "$out/devices.txt"
status=0
./build-gpu/examples/paged_attention --verbose | tee "$out/paged_attention.txt" ||
  status=1
./build-gpu/clbt bench --only kv_cache --runs "$runs" \
  --json "$out/bench_kv_cache.json" | tee "$out/bench_kv_cache.txt" || status=1
CLBT_LIBRARY="$PWD/build-gpu/libclbt.so" "$python" tools/gpu/kv_cache_triton.py \
  --vllm "$vllm" --out "$out" --iters "$runs" \
  --bench-json "$out/bench_kv_cache.json" --require-triton |
  tee "$out/kv_cache_triton.txt" || status=1
exit "$status"
