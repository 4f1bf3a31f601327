#!/usr/bin/env bash
# 0.5 (f25b56b) and this tree, side by side on an NVIDIA GPU in one device
# call: both built, then `clbt bench --only step,arguments` of each, in
# interleaved rounds (A B A B ...), so that the GPU's and the host's state
# move both alike; the step section holds the steady and churning steps
# (1 in 64 and 1 in 16 replaced), the arguments section the launch's
# argument lists.
#
#   tools/gpu/step_ab.sh OUT_DIR [RUNS] [ROUNDS]     (default 500 runs, 2 rounds)
#
# 0.5's source comes from build-ab/clbt-0.5.tar.gz when it is there (a git
# archive of f25b56b, made beside the tree and carried to the device:
#   git archive --format=tar.gz -o build-ab/clbt-0.5.tar.gz f25b56b
# build-ab/ is ignored), else from the tree's git history. Everything
# printed lands in OUT_DIR: each build's devices and selftest, each
# round's report (0.5-N.txt/.json, branch-N.txt/.json) and compare.md
# (tools/bench/compare_ab.py: each figure's median over the rounds, side by
# side). A part that fails is reported and the rest still run; the exit
# status is the number of parts that failed. About 4 minutes on an H100 at
# the defaults.
set -uo pipefail
[ $# -ge 1 ] || { sed -n '9p' "$0" >&2; exit 2; }
out=$1 runs=${2:-500} rounds=${3:-2}
baseline=f25b56b
archive="build-ab/clbt-0.5.tar.gz"
mkdir -p "$out" build-ab /tmp/vendors
echo /usr/lib/libnvidia-opencl.so.1 > /tmp/vendors/nvidia.icd
cp /etc/OpenCL/vendors/pocl.icd /tmp/vendors/ 2>/dev/null || true
export OCL_ICD_VENDORS=/tmp/vendors CLBT_DEVICE=${CLBT_DEVICE:-nvidia:gpu}

failed=0
# Runs a part, its output into OUT_DIR/NAME.txt; counts a failure.
part() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" > "$out/$name.txt" 2>&1
  local status=$?
  tail -n 3 "$out/$name.txt"
  echo "== $name: exit $status, $((SECONDS - start)) s"
  [ "$status" -eq 0 ] || failed=$((failed + 1))
  return "$status"
}

# shellcheck disable=SC2317 # called through part
unpack_baseline() {
  rm -rf build-ab/src-0.5 && mkdir -p build-ab/src-0.5 &&
    if [ -f "$archive" ]; then
      tar -xzf "$archive" -C build-ab/src-0.5
    else
      git archive "$baseline" | tar -x -C build-ab/src-0.5
    fi
}

# shellcheck disable=SC2317 # called through part
build() {
  cmake -S "$1" -B "$2" -DCLBT_BUILD_TESTS=OFF && cmake --build "$2" -j"$(nproc)"
}

part unpack unpack_baseline || { echo "step_ab.sh: no source of $baseline ($archive, or git)" >&2; exit 1; }
part build-0.5 build build-ab/src-0.5 build-ab/0.5 || exit 1
part build-branch build . build-ab/branch || exit 1
for build in 0.5 branch; do
  part "devices-$build" "build-ab/$build/clbt" devices
  part "selftest-$build" "build-ab/$build/clbt" selftest --seed 1 --rounds 10
done
for round in $(seq 1 "$rounds"); do
  for build in 0.5 branch; do
    part "$build-$round" "build-ab/$build/clbt" bench --only step,arguments \
      --runs "$runs" --json "$out/$build-$round.json"
  done
done
a=() b=()
for round in $(seq 1 "$rounds"); do
  [ -s "$out/0.5-$round.json" ] && a+=("$out/0.5-$round.json")
  [ -s "$out/branch-$round.json" ] && b+=("$out/branch-$round.json")
done
if [ ${#a[@]} -gt 0 ] && [ ${#b[@]} -gt 0 ]; then
  part compare python3 tools/bench/compare_ab.py --a "${a[@]}" --b "${b[@]}" \
    --names 0.5 branch
  cp "$out/compare.txt" "$out/compare.md"
fi
echo "step_ab.sh: $failed part(s) failed; everything is in $out"
exit "$failed"
