#!/usr/bin/env bash
# What a change costs the step, on one device in one call: this tree (new)
# against a base (a commit, or a tar of its tree), each built without the
# tests, new's selftest on the device, then `clbt bench --only step` of each
# build run alternately (base new, new base, ...) and
# tools/compare_step_ab.py's summary: per row the step over the empty
# kernel and the steady steps' device work, new over base.
#
#   tools/gpu_step_ab.sh [--base COMMIT|TAR] [--runs N] [--budget S] OUT_DIR
#
# --base   a commit of this checkout's history (default f25b56b, the step
#          before issue 44's race-free commit), or a tar of a tree
#          (`git archive -o base.tar f25b56b`) where the copy has no .git
# --runs   runs per figure of each bench (default 200)
# --budget seconds for the alternating benches (default 150): a further
#          pair starts while the pairs so far say it fits; at least one
# The device is CLBT_DEVICE's when that is set (portable:cpu for PoCL);
# otherwise NVIDIA's OpenCL GPU, registered as tools/gpu_bench.sh does.
# OUT_DIR gets log.txt (everything printed), selftest.txt, summary.txt,
# summary.json and raw.tar.gz (each bench's text and JSON): few files, as a
# device call brings back at most eight. Exits non-zero when a build, the
# selftest, a bench or the comparison fails.
set -uo pipefail
base=f25b56b runs=200 budget=150
while [ $# -gt 1 ]; do
  case $1 in
    --base) base=$2 ;;
    --runs) runs=$2 ;;
    --budget) budget=$2 ;;
    *) sed -n '9p' "$0" >&2; exit 2 ;;
  esac
  shift 2
done
[ $# -eq 1 ] || { sed -n '9p' "$0" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
work="$root/build-ab"
rm -rf "$work" && mkdir -p "$work/base-src" "$work/raw"
exec > >(tee "$out/log.txt") 2>&1

if [ -z "${CLBT_DEVICE:-}" ]; then
  mkdir -p /tmp/vendors
  echo /usr/lib/libnvidia-opencl.so.1 > /tmp/vendors/nvidia.icd
  cp /etc/OpenCL/vendors/pocl.icd /tmp/vendors/ 2>/dev/null || true
  export OCL_ICD_VENDORS=/tmp/vendors CLBT_DEVICE=nvidia:gpu
fi
echo "gpu_step_ab.sh: new = $(cd "$root" && git describe --always --dirty 2>/dev/null || echo 'this tree'), base = $base, device $CLBT_DEVICE, --runs $runs, budget ${budget} s"

# The base's tree, from the history or a tar.
if [ -f "$base" ]; then
  tar -xf "$base" -C "$work/base-src"
else
  git -C "$root" archive "$base" | tar -x -C "$work/base-src"
fi || { echo "gpu_step_ab.sh: no tree for base $base (a copy without .git needs --base TAR)"; exit 1; }

build() { # SOURCE BUILD_DIR
  cmake -S "$1" -B "$2" -DCLBT_BUILD_TESTS=OFF > /dev/null &&
    cmake --build "$2" -j"$(nproc)" > "$2.log" 2>&1 ||
    { tail -30 "$2.log"; return 1; }
}
start=$SECONDS
build "$work/base-src" "$work/base" || { echo "gpu_step_ab.sh: the base's build failed"; exit 1; }
build "$root" "$work/new" || { echo "gpu_step_ab.sh: this tree's build failed"; exit 1; }
echo "== builds: $((SECONDS - start)) s"

start=$SECONDS
"$work/new/clbt" selftest --seed 1 --rounds "${SELFTEST_ROUNDS:-8}" 2>&1 |
  tee "$out/selftest.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu_step_ab.sh: new's selftest failed"; exit 1; }
echo "== selftest: $((SECONDS - start)) s"

failed=0
bench() { # BUILD RUN
  local started=$SECONDS
  "$work/$1/clbt" bench --only step --runs "$runs" \
    --json "$work/raw/$1_$2.json" > "$work/raw/$1_$2.txt" 2>&1 ||
    { echo "gpu_step_ab.sh: $1's bench $2 failed"; failed=$((failed + 1)); }
  echo "== $1 $2: $((SECONDS - started)) s"
}
start=$SECONDS
pair=1
while :; do
  if [ $((pair % 2)) -eq 1 ]; then bench base $pair; bench new $pair
  else bench new $pair; bench base $pair; fi
  spent=$((SECONDS - start))
  [ $((spent + spent / pair)) -le "$budget" ] || break
  pair=$((pair + 1))
done
echo "== $pair pairs: $((SECONDS - start)) s"

python3 "$root/tools/compare_step_ab.py" "$work/raw" --json "$out/summary.json" |
  tee "$out/summary.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=$((failed + 1))
tar -czf "$out/raw.tar.gz" -C "$work" raw
echo "gpu_step_ab.sh: $failed failure(s); everything is in $out"
exit "$failed"
