#!/usr/bin/env bash
# clbt's paged attention on an NVIDIA GPU (issue 41), against vLLM's own
# Triton unified_attention, in one device call:
#
#   tools/gpu/attention.sh VLLM_DIR OUT_DIR [RUNS]
#
# VLLM_DIR is the git-ignored .vllm/ folder (carried to the device): vLLM's
# vllm/v1/attention/ops/triton_unified_attention.py and
# triton_attention_helpers.py with stand-ins for the vllm modules they
# import (.vllm/README). Builds clbt without the tests, lists the devices,
# runs examples/paged_attention on the GPU (three fp16 layers, checked
# against dense attention), then the bench's attention sections once per
# shape of the kernels in VARIANTS below (CLBT_ATTENTION_TUNING: the
# decode kernel's work-group, lane bytes and keys a pass, how far contexts
# are split, the tile kernel's rows and keys; each run in its own
# process, its ratios taken against the copy and the empty kernel of the
# same run), tools/gpu/attention_triton.py right after the first variant,
# with its figures (every case's output against Triton's and a float64
# reference, and both kernels timed side by side in one process). Needs torch with
# CUDA, Triton and the NVIDIA OpenCL driver (CLBT_DEVICE=nvidia:gpu unless
# set; PYTHON names the interpreter, default python3; REQUIRE_TRITON= lets
# the run go on without Triton, as a dry run on PoCL does:
#   CLBT_DEVICE=portable:cpu CLBT_TUNING=gpu REQUIRE_TRITON= \
#     tools/gpu/attention.sh .vllm /tmp/attention 2
# ). Everything printed
# lands in OUT_DIR; the exit status is nonzero if any part failed or an
# output was wrong. About five minutes on an H100.
set -euo pipefail
vllm=$1 out=$2 runs=${3:-50}
upstream="$vllm/vllm/v1/attention/ops/triton_unified_attention.py"
[ -f "$upstream" ] || { echo "tools/gpu/attention.sh: no $upstream" >&2; exit 2; }
mkdir -p "$out"
export CLBT_DEVICE=${CLBT_DEVICE:-nvidia:gpu}
python=${PYTHON:-python3} # the one with torch and Triton
require_triton=${REQUIRE_TRITON---require-triton}

# The shapes of the kernels to time: the GPU row's own first (its figures
# go beside Triton's), then one change each.
VARIANTS=(
  ""
  "local=128"
  "tokens=1"
  "tokens=4"
  "lane_bytes=32"
  "groups_per_unit=4,min_split=256"
  "groups_per_unit=8,min_split=128"
  "tile_rows=64,tile_keys=8"
)

cmake -S . -B build-gpu -DCLBT_BUILD_TESTS=OFF > "$out/build.txt" 2>&1
cmake --build build-gpu -j"$(nproc)" >> "$out/build.txt" 2>&1
./build-gpu/clbt devices | tee "$out/devices.txt"
status=0
./build-gpu/examples/paged_attention --verbose | tee "$out/paged_attention.txt" ||
  status=1
# Times variant $1 of VARIANTS with the bench's attention sections.
bench_variant() {
  local variant=${VARIANTS[$1]}
  echo "== variant $1: ${variant:-the GPU row}" | tee -a "$out/bench_attention.txt"
  CLBT_ATTENTION_TUNING=$variant ./build-gpu/clbt bench \
    --only attention_decode,attention_short,attention_prefill \
    --runs "$runs" --json "$out/bench_attention_$1.json" \
    2>> "$out/bench_attention_stderr.txt" | tee -a "$out/bench_attention.txt"
}
# The GPU row and Triton beside it first, so that a run cut short by the
# device's time limit still has the comparison; then the other variants.
bench_variant 0 || status=1
CLBT_LIBRARY="$PWD/build-gpu/libclbt.so" "$python" tools/gpu/attention_triton.py \
  --vllm "$vllm" --out "$out" --iters "$runs" \
  --bench-json "$out/bench_attention_0.json" $require_triton |
  tee "$out/attention_triton.txt" || status=1
for i in "${!VARIANTS[@]}"; do
  [ "$i" -eq 0 ] || bench_variant "$i" || status=1
done
exit "$status"
