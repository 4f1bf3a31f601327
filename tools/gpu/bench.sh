#!/usr/bin/env bash
# clbt against the seed's Triton kernel and the seed's step on an NVIDIA GPU,
# side by side, in one device call.
#
#   tools/gpu/bench.sh ANCHOR OUT_DIR [RUNS]          the whole bench
#   tools/gpu/bench.sh --step ANCHOR OUT_DIR [RUNS]   the step (issue 25)
#
# ANCHOR is shared/anchors/triton_slot_mapping.py (needs torch and triton);
# the seed's whole step, seed_step.py, is taken from the same directory.
# Both forms register NVIDIA's OpenCL driver, build clbt without the tests,
# check it with the selftest on the GPU and run the seed's step; then the
# whole form runs the Triton anchor (which dumps its inputs and outputs),
# an empty Triton kernel and every section of clbt bench, comparing slot
# ids with the Triton kernel's, and --step runs clbt bench's step and
# arguments sections alone. Both end with clbt's step beside the seed's and
# MRV2's (tools/bench/compare_step.py; MRV2's step from MRV2_JSON when set, a
# file in seed_step.py's form measured in the same call, otherwise the
# figures of shared/notes/mrv2.md). The bench's step section also counts
# the library's OpenCL calls per step on NVIDIA's driver where the build
# could link the counted copy (its step_calls caption says so).
# Everything printed lands in OUT_DIR. A part that fails is reported and
# the rest still run (one device call is precious); the exit status is the
# number of parts that failed.
set -uo pipefail
only=""
if [ "${1:-}" = "--step" ]; then
  only=step,arguments
  shift
fi
[ $# -ge 2 ] || { sed -n '4,5p' "$0" >&2; exit 2; }
anchor=$1 out=$2 runs=${3:-2000}
seed_step=$(dirname "$anchor")/seed_step.py
[ -f "$seed_step" ] || { echo "tools/gpu/bench.sh: no $seed_step beside the anchor" >&2; exit 2; }
mkdir -p "$out" /tmp/vendors
echo /usr/lib/libnvidia-opencl.so.1 > /tmp/vendors/nvidia.icd
cp /etc/OpenCL/vendors/pocl.icd /tmp/vendors/ 2>/dev/null || true
export OCL_ICD_VENDORS=/tmp/vendors CLBT_DEVICE=nvidia:gpu

failed=0
# Runs a part, its output into OUT_DIR/NAME.txt and the log; counts a failure.
part() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "$out/$name.txt"
  local status=${PIPESTATUS[0]}
  echo "== $name: exit $status, $((SECONDS - start)) s"
  [ "$status" -eq 0 ] || failed=$((failed + 1))
  return "$status"
}

# shellcheck disable=SC2317 # called through part
build() {
  cmake -S . -B build-gpu -DCLBT_BUILD_TESTS=OFF &&
    cmake --build build-gpu -j"$(nproc)"
}
part build build > /dev/null || { echo "tools/gpu/bench.sh: the build failed ($out/build.txt)" >&2; exit 1; }
part devices ./build-gpu/clbt devices
part selftest ./build-gpu/clbt selftest --seed 1 --rounds "${SELFTEST_ROUNDS:-40}"
part seed_step python3 "$seed_step" --iters "$runs" --json "$out/seed_step.json"
if [ -n "$only" ]; then
  part bench ./build-gpu/clbt bench --only "$only" --runs "$runs" \
    --json "$out/bench.json"
else
  part triton python3 "$anchor" --out /tmp/triton --iters "$runs"
  part triton_floor python3 tools/gpu/triton_floor.py --iters "$runs"
  part bench ./build-gpu/clbt bench --runs "$runs" --json "$out/bench.json" \
    --plot "$out/plot.dat" --compare /tmp/triton
fi
part step python3 tools/bench/compare_step.py "$out/seed_step.json" "$out/bench.json" \
  ${MRV2_JSON:+--mrv2 "$MRV2_JSON"} --json "$out/step.json"
echo "tools/gpu/bench.sh: $failed part(s) failed; everything is in $out"
exit "$failed"
