#!/usr/bin/env bash
# Earlier builds and this tree, side by side on an NVIDIA GPU in one device
# call: each built, then `clbt bench --only step,arguments` of each, in
# interleaved rounds (A B A B ...), so that the GPU's and the host's state
# move all alike; the step section holds the steady and churning steps
# (1 in 64 and 1 in 16 replaced), the arguments section the launch's
# argument lists.
#
#   tools/gpu/step_ab.sh OUT_DIR [RUNS] [ROUNDS]     (default 500 runs, 2 rounds)
#
# The earlier builds are the git archives build-ab/clbt-NAME.tar.gz made
# beside the tree and carried to the device (build-ab/ is ignored), 0.5
# always among them, from the tree's git history when its archive is not
# there:
#   git archive --format=tar.gz -o build-ab/clbt-0.5.tar.gz f25b56b
# Everything printed lands in OUT_DIR: each build's devices and selftest,
# each round's report (NAME-N.txt/.json, branch-N.txt/.json) and
# compare-A-B.md (tools/bench/compare_ab.py: each figure's median over the
# rounds, B beside A) for every build beside 0.5 and every other earlier
# build beside this tree. A part that fails
# is reported and the rest still run; the exit status is the number of
# parts that failed. About 2 minutes a build on an H100 at the defaults.
set -uo pipefail
[ $# -ge 1 ] || { sed -n '9p' "$0" >&2; exit 2; }
out=$1 runs=${2:-500} rounds=${3:-2}
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

# Unpacks earlier build $1 from its archive (0.5 from git without one).
# shellcheck disable=SC2317 # called through part
unpack() {
  rm -rf "build-ab/src-$1" && mkdir -p "build-ab/src-$1" &&
    if [ -f "build-ab/clbt-$1.tar.gz" ]; then
      tar -xzf "build-ab/clbt-$1.tar.gz" -C "build-ab/src-$1"
    else
      [ "$1" = 0.5 ] && git archive f25b56b | tar -x -C "build-ab/src-$1"
    fi
}

# shellcheck disable=SC2317 # called through part
build() {
  cmake -S "$1" -B "$2" -DCLBT_BUILD_TESTS=OFF && cmake --build "$2" -j"$(nproc)"
}

earlier=(0.5)
for archive in build-ab/clbt-*.tar.gz; do
  name=${archive#build-ab/clbt-} name=${name%.tar.gz}
  [ -f "$archive" ] && [ "$name" != 0.5 ] && earlier+=("$name")
done
for name in "${earlier[@]}"; do
  part "unpack-$name" unpack "$name" || { echo "step_ab.sh: no source of $name" >&2; exit 1; }
  part "build-$name" build "build-ab/src-$name" "build-ab/$name" || exit 1
done
part build-branch build . build-ab/branch || exit 1
builds=("${earlier[@]}" branch)
for build in "${builds[@]}"; do
  part "devices-$build" "build-ab/$build/clbt" devices
  part "selftest-$build" "build-ab/$build/clbt" selftest --seed 1 --rounds 10
done
for round in $(seq 1 "$rounds"); do
  for build in "${builds[@]}"; do
    part "$build-$round" "build-ab/$build/clbt" bench --only step,arguments \
      --runs "$runs" --json "$out/$build-$round.json"
  done
done
# Each build's reports, as --a or --b arguments of compare_ab.py.
reports() {
  for round in $(seq 1 "$rounds"); do
    [ -s "$out/$1-$round.json" ] && echo "$out/$1-$round.json"
  done
}
# Lays build $2 beside build $1 in OUT_DIR/compare-$1-$2.md.
compare() {
  local a b
  mapfile -t a < <(reports "$1")
  mapfile -t b < <(reports "$2")
  [ ${#a[@]} -gt 0 ] && [ ${#b[@]} -gt 0 ] || return 0
  part "compare-$1-$2" python3 tools/bench/compare_ab.py --a "${a[@]}" \
    --b "${b[@]}" --names "$1" "$2"
  mv "$out/compare-$1-$2.txt" "$out/compare-$1-$2.md"
}
# Every build beside 0.5, and every other earlier build beside this tree.
for build in "${builds[@]:1}"; do compare 0.5 "$build"; done
for name in "${earlier[@]:1}"; do compare "$name" branch; done
echo "step_ab.sh: $failed part(s) failed; everything is in $out"
exit "$failed"
