#!/usr/bin/env bash
# clbt against the seed's Triton kernel on an NVIDIA GPU, side by side.
#
#   tools/gpu_bench.sh ANCHOR OUT_DIR [RUNS]
#
# ANCHOR is shared/anchors/triton_slot_mapping.py (needs torch and triton);
# the seed's whole step, seed_step.py, is taken from the same directory.
# Registers NVIDIA's OpenCL driver, builds clbt without the tests, checks it
# with the selftest on the GPU, runs the Triton anchor (which dumps its
# inputs and outputs) and the seed's step, then clbt bench on the same
# shapes, comparing slot ids with the Triton kernel's, and prints clbt's
# step beside the seed's and MRV2's (tools/compare_step.py; MRV2's step
# from MRV2_JSON when set, a file in seed_step.py's form measured in the
# same call, otherwise issue 18's figures). The bench's step section also
# counts the library's OpenCL calls per step on NVIDIA's driver where the
# build could link the counted copy (its step_calls caption says so).
# Everything printed lands in OUT_DIR.
set -euo pipefail
anchor=$1 out=$2 runs=${3:-2000}
seed_step=$(dirname "$anchor")/seed_step.py
[ -f "$seed_step" ] || { echo "gpu_bench.sh: no $seed_step beside the anchor" >&2; exit 2; }
mkdir -p "$out" /tmp/vendors
echo /usr/lib/libnvidia-opencl.so.1 > /tmp/vendors/nvidia.icd
cp /etc/OpenCL/vendors/pocl.icd /tmp/vendors/ 2>/dev/null || true
export OCL_ICD_VENDORS=/tmp/vendors CLBT_DEVICE=nvidia:gpu

cmake -S . -B build-gpu -DCLBT_BUILD_TESTS=OFF > "$out/build.txt" 2>&1
cmake --build build-gpu -j"$(nproc)" >> "$out/build.txt" 2>&1
./build-gpu/clbt devices | tee "$out/devices.txt"
./build-gpu/clbt selftest --seed 1 --rounds 40 | tee "$out/selftest.txt"
python3 "$anchor" --out /tmp/triton --iters "$runs" | tee "$out/triton.txt"
python3 tools/triton_floor.py --iters "$runs" | tee -a "$out/triton.txt"
python3 "$seed_step" --iters "$runs" --json "$out/seed_step.json" |
  tee "$out/seed_step.txt"
./build-gpu/clbt bench --runs "$runs" --json "$out/bench.json" \
  --plot "$out/plot.dat" --compare /tmp/triton | tee "$out/bench.txt"
python3 tools/compare_step.py "$out/seed_step.json" "$out/bench.json" \
  ${MRV2_JSON:+--mrv2 "$MRV2_JSON"} --json "$out/step.json" |
  tee "$out/step.txt"
